/**
 * How the pacer's (shard, instance) invocations are laid out on EventBridge: one rule fires
 * every minute, at its own second, for up to five targets (EventBridge's most per rule), each
 * target the pacer with the constant input `{shard, instance}`; the rules, the shards' leader
 * override parameters and alarms are split over nested stacks of at most
 * {@link PACER_SHARDS_PER_STACK} shards, so no stack nears CloudFormation's 500 resources
 * (docs/operations.md, "Scale").
 *
 * A rule holds one instance index of consecutive shards, so the instances of one shard sit in
 * different rules and fire at different seconds: one late or lost delivery costs a shard one
 * instance, not all of them.
 *
 * Pure data over the pacer settings.
 */
import type { PacerInput, PacerSettings } from './resources.js';

/** EventBridge's limit of targets per rule. */
export const EVENTBRIDGE_TARGETS_PER_RULE = 5;

/**
 * Shards per nested stack. Each shard brings its leader-override parameter, three alarms (no
 * leader, several leaders, stale parameters) and up to 9 / 5 rules: at most 64 × 4 + 64 × 9 / 5
 * ≈ 372 resources at 9 instances per shard, under CloudFormation's 500.
 */
export const PACER_SHARDS_PER_STACK = 64;

/** One scheduling rule: one instance index of up to five consecutive shards. */
export interface PacerRule {
  readonly instance: number;
  /** The first shard of the rule (names the rule). */
  readonly firstShard: number;
  /** Target id (unique in the rule) and the constant input the pacer receives. */
  readonly targets: readonly { readonly id: string; readonly input: PacerInput }[];
}

/** One nested stack of the pacer: its shards and their rules. */
export interface PacerStackLayout {
  readonly index: number;
  readonly shards: readonly number[];
  readonly rules: readonly PacerRule[];
}

/** The pacer's nested stacks, their shards and rules, for the given layout. */
export function pacerScheduleLayout(
  s: Pick<PacerSettings, 'shards' | 'instancesPerShard'>,
  shardsPerStack = PACER_SHARDS_PER_STACK,
): PacerStackLayout[] {
  const out: PacerStackLayout[] = [];
  for (let first = 0, index = 0; first < s.shards; first += shardsPerStack, index++) {
    const shards = Array.from({ length: Math.min(shardsPerStack, s.shards - first) }, (_, i) => first + i);
    const rules: PacerRule[] = [];
    for (let instance = 0; instance < s.instancesPerShard; instance++) {
      for (let i = 0; i < shards.length; i += EVENTBRIDGE_TARGETS_PER_RULE) {
        const group = shards.slice(i, i + EVENTBRIDGE_TARGETS_PER_RULE);
        rules.push({
          instance,
          firstShard: group[0] as number,
          targets: group.map((shard) => ({ id: `s${shard}`, input: { shard, instance } })),
        });
      }
    }
    out.push({ index, shards, rules });
  }
  return out;
}

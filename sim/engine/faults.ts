/**
 * The faults phase of the single-region engine, replayed at their instants: the leader killed,
 * the region flipped (both on {@link SimPacer}), Redis restarted empty (FLUSHALL, scripts gone,
 * connections dropped). Notices stalled are applied where notices are queued (`NoticeFlow`).
 */
import type { RedisClient } from '../../shared/redis/connect.js';
import { RawScriptCaller } from '../../shared/redis/resp/script-caller.js';
import type { Scenario } from '../scenario.js';
import type { SimPacer } from './pacer.js';

/** The scenario's faults from a run's start on (module comment). */
export class FaultSchedule {
  /** One line per fault applied: instant and kind. */
  readonly log: string[] = [];
  private next = 0;

  constructor(
    private readonly scenario: Scenario,
    private readonly redis: RedisClient,
    private readonly pacer: SimPacer,
    runStart: number,
  ) {
    // Faults of days a run does not simulate are not replayed at its start.
    const faults = scenario.faults;
    while (this.next < faults.length && (faults[this.next]?.atMs ?? 0) < runStart) this.next++;
  }

  /** Applies the faults due by `now`. */
  async apply(now: number): Promise<void> {
    const faults = this.scenario.faults;
    while (this.next < faults.length && (faults[this.next]?.atMs ?? 0) <= now) {
      const f = faults[this.next++] as Scenario['faults'][number];
      this.log.push(`${new Date(now).toISOString()} ${f.kind}`);
      if (f.kind === 'leader-killed') this.pacer.kill(now);
      else if (f.kind === 'region-flipped') this.pacer.flip();
      else if (f.kind === 'redis-restarted') {
        // Restarted empty: every key and script gone (ioredis reloads scripts on NOSCRIPT).
        await this.redis.flushall();
        await this.redis.script('FLUSH');
        // A restarted node drops its connections: the raw script caller's too (its next calls
        // load the scripts again, in order, instead of being refused and sent again later).
        RawScriptCaller.of(this.redis).reconnect();
      }
    }
  }
}

/**
 * Reading synthesized Paceline templates in the synth tests: a region's stack with its nested
 * pacer-shard stacks, IAM statements in a comparable form, the pacer's scheduled targets.
 */
import { readFileSync } from 'node:fs';
import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { RegionalStack } from '../../cdk/regional-stack.js';
import type { AccessStatement } from '../../shared/region/access.js';

/** The context of the committed cdk.json. */
export const cdkJson = JSON.parse(readFileSync(new URL('../../cdk.json', import.meta.url), 'utf8')) as {
  context: Record<string, unknown>;
};

/** A region's templates: its stack, then each nested pacer-shard stack. */
export function regionTemplates(stack: RegionalStack): Template[] {
  return [Template.fromStack(stack), ...stack.pacerShards.map((n) => Template.fromStack(n))];
}

/** One statement as a comparable string: sid, effect, sorted actions, resources, condition. */
function key(s: {
  Sid?: unknown;
  Effect?: unknown;
  Action: unknown;
  Resource: unknown;
  Condition?: unknown;
}): string {
  return JSON.stringify({
    Sid: s.Sid,
    Effect: s.Effect ?? 'Allow',
    Action: [s.Action].flat().sort(),
    Resource: [s.Resource]
      .flat()
      .map((r) => JSON.stringify(r))
      .sort(),
    Condition: s.Condition,
  });
}

/** Statements of a synthesized policy document, comparable with {@link expectedStatements}. */
export function statementKeys(
  statements: readonly {
    Sid?: unknown;
    Effect?: unknown;
    Action: unknown;
    Resource: unknown;
    Condition?: unknown;
  }[],
): string[] {
  return statements.map(key).sort();
}

/** Derived statements (shared/region/access.ts) resolved in `stack`, comparable with the template's. */
export function expectedStatements(stack: Stack, statements: readonly AccessStatement[]): string[] {
  return statements
    .map((s) =>
      key({
        Sid: s.sid,
        Action: [...s.actions],
        Resource: stack.resolve([...s.resources]),
        ...(s.condition ? { Condition: stack.resolve(s.condition) } : {}),
      }),
    )
    .sort();
}

/** Every statement of the IAM policies attached to a role (by the role's logical id). */
export function roleStatements(
  t: Template,
  roleLogicalId: string,
): { Sid?: unknown; Effect?: unknown; Action: unknown; Resource: unknown; Condition?: unknown }[] {
  return Object.values(t.findResources('AWS::IAM::Policy'))
    .filter((p) =>
      (p.Properties.Roles as unknown[]).some(
        (r) => JSON.stringify(r) === JSON.stringify({ Ref: roleLogicalId }),
      ),
    )
    .flatMap((p) => p.Properties.PolicyDocument.Statement);
}

/** The pacer's scheduled targets across templates: rule, input, retry policy. */
export function scheduledTargets(templates: readonly Template[]): {
  rule: string;
  input: string;
  retries: number | undefined;
  maxAge: number | undefined;
  schedule: string;
  arn: unknown;
}[] {
  type Target = {
    Arn: unknown;
    Input?: string;
    RetryPolicy?: { MaximumRetryAttempts?: number; MaximumEventAgeInSeconds?: number };
  };
  return templates.flatMap((t) =>
    Object.values(t.findResources('AWS::Events::Rule')).flatMap((r) => {
      const p = r.Properties as { Name?: string; ScheduleExpression: string; Targets: Target[] };
      return p.Targets.filter((x) => x.Input !== undefined).map((x) => ({
        rule: p.Name ?? '',
        input: x.Input as string,
        retries: x.RetryPolicy?.MaximumRetryAttempts,
        maxAge: x.RetryPolicy?.MaximumEventAgeInSeconds,
        schedule: p.ScheduleExpression,
        arn: x.Arn,
      }));
    }),
  );
}

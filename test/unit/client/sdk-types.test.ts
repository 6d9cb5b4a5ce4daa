/**
 * The package bundles the AWS SDK and installs none of it, so its declarations name the SDK clients
 * through `packages/client/types/aws-sdk-clients.d.ts`. A caller's real clients
 * (`@aws-sdk/client-dynamodb`, `@aws-sdk/client-kinesis`, the versions this repository uses) must
 * be assignable to those types wherever the public API takes one; an object that is not a client
 * must not be.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { NODE_TYPES, strictProgram } from '../../support/typescript.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const shim = join(root, 'packages/client/types/aws-sdk-clients.js');

/** Type-checks one module against the shipped SDK client types; the diagnostics, one line each. */
function typeCheck(text: string): string[] {
  const dir = join(root, 'test-output', 'sdk-types');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const file = join(dir, 'check.ts');
  writeFileSync(file, text);
  const program = strictProgram([file], NODE_TYPES);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName === file)
    .map((d) => {
      const line =
        d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
      return `check.ts(${line}): ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    });
}

const header = `import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import type * as Shipped from '${shim}';
`;

describe('the SDK client types in the package declarations', () => {
  it("accept the SDK's own DynamoDB and Kinesis clients", () => {
    const errors = typeCheck(
      `${header}
const dynamodb: Shipped.DynamoDBClient = new DynamoDBClient({ region: 'us-east-1' });
const kinesis: Shipped.KinesisClient = new KinesisClient({ region: 'us-east-1' });
const forConfig: Pick<Shipped.KinesisClient, 'send' | 'destroy'> = kinesis;
export { dynamodb, forConfig };
`,
    );
    expect(errors).toEqual([]);
  }, 60_000);

  it('refuse what is not a client', () => {
    const errors = typeCheck(
      `${header}
const notDynamo: Shipped.DynamoDBClient = { send: async () => undefined, destroy() {} };
const notKinesis: Shipped.KinesisClient = { send: 'PutRecords', destroy() {} };
export { notDynamo, notKinesis };
`,
    );
    expect(
      errors.some((e) => e.startsWith('check.ts(5)') && /config|middlewareStack/.test(e)),
      errors.join('\n'),
    ).toBe(true);
    expect(
      errors.some((e) => e.startsWith('check.ts(6)') && /'string' is not assignable/.test(e)),
      errors.join('\n'),
    ).toBe(true);
  }, 60_000);
});

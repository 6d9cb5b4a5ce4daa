/**
 * Every TypeScript block of docs/client.md compiles against the package (`paceline/client` =
 * packages/client/src/index.ts, strict, as an ESM module with top-level await): a snippet written
 * from the page works as written. Each block is its own module; a deliberately wrong variant
 * proves the check reports errors.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { NODE_TYPES, strictProgram } from '../../support/typescript.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** The ```ts blocks of a markdown file. */
function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

/** Type-checks modules (name → text) against the package; returns the diagnostics, one line each. */
function typeCheck(files: Record<string, string>): string[] {
  // Inside the repository (its package.json says "type": "module"; test-output/ is git-ignored).
  const dir = join(root, 'test-output', 'docs-blocks');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const names = Object.entries(files).map(([name, text]) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  });
  const program = strictProgram(names, {
    ...NODE_TYPES,
    noUncheckedIndexedAccess: true,
    paths: { 'paceline/client': [join(root, 'packages/client/src/index.ts')] },
  });
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName.startsWith(dir))
    .map((d) => {
      const where =
        d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
      const file = d.file?.fileName.slice(dir.length + 1);
      return `${file}(${(where?.line ?? 0) + 1}): ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
    });
}

describe('docs/client.md', () => {
  const blocks = tsBlocks(readFileSync(join(root, 'docs/client.md'), 'utf8'));

  it('has the request path, whole: candidates, bid, notice, action', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    const path = blocks.find((b) => b.includes('checkFrequencyCaps'));
    expect(path).toBeDefined();
    for (const part of [
      'entities:',
      'caps:',
      'windowMs',
      'max:',
      '.bid(',
      'sendNotice(',
      'sendAction(',
      'insertionId',
    ]) {
      expect(path, part).toContain(part);
    }
  });

  it('every TypeScript block type-checks against the package', () => {
    const files = Object.fromEntries(blocks.map((b, i) => [`block-${i + 1}.ts`, b]));
    expect(typeCheck(files)).toEqual([]);
  }, 120_000);

  it('the check reports a wrong block (a numeric campaign id, a misspelt cap field)', () => {
    const path = blocks.find((b) => b.includes('checkFrequencyCaps')) as string;
    const wrong = path
      .replace("campaignId: 'spring', basePriceMicros", 'campaignId: 42, basePriceMicros')
      .replace('windowMs: 3_600_000', 'window: 3_600_000');
    const errors = typeCheck({ 'wrong.ts': wrong });
    expect(
      errors.some((e) => /number.*not assignable to.*string/.test(e)),
      errors.join('\n'),
    ).toBe(true);
    expect(
      errors.some((e) => /window/.test(e)),
      errors.join('\n'),
    ).toBe(true);
  }, 120_000);
});

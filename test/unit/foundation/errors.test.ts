/**
 * Every error Paceline throws on purpose is a `PacelineError` (shared/errors.ts) with a stable
 * `code`: every exported error class of the product code (shared, functions, cli, local, sim,
 * the client package) extends it — directly or through another such class — and the codes it
 * declares are distinct and well-formed; existing classes keep their names and `instanceof`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BudgetValidationError } from '../../../shared/budget/model.js';
import { InvalidDayError } from '../../../shared/budget/time-zone.js';
import { InvalidBidInputError } from '../../../shared/client/client.js';
import { ActionEventError } from '../../../shared/counting/schema.js';
import { errorKind, inputErrorKind, PacelineError } from '../../../shared/errors.js';
import { KinesisPutError } from '../../../shared/kinesis/producer.js';
import { UnknownPacingModeError } from '../../../shared/pacing/modes.js';
import { MalformedRecordError } from '../../../shared/quarantine/quarantine.js';
import { RawRedisError, RawScriptError } from '../../../shared/redis/resp/errors.js';
import { InvalidDeploymentSettingsError } from '../../../shared/region/deployment.js';
import { SpendSchemaError } from '../../../shared/spend/events.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** TypeScript sources of the product folders (no tests, no declarations). */
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath, e.name))
    .filter((p) => !p.includes('node_modules') && !p.includes(`${join('packages', 'client', 'dist')}`));
}

interface ClassDecl {
  readonly name: string;
  readonly parent: string;
  readonly exported: boolean;
  readonly file: string;
  /** The literal of `readonly code = '…'` in its body, if it declares one. */
  readonly code?: string;
}

/** A class declared as a kind: `class X extends errorKind('X', 'code'[, Base])` (or `inputErrorKind`). */
const KIND =
  /^(export )?class (\w+) extends (?:errorKind|inputErrorKind)(?:<[^>]*>)?\(\s*'(\w+)',\s*'([^']+)'(?:,\s*(\w+),?\s*\))?/gm;

/** Every `class X extends Y` of the product code, with the code literal of its body or its kind. */
function classes(): ClassDecl[] {
  const out: ClassDecl[] = [];
  const files = ['shared', 'functions', 'cli', 'local', 'sim', 'packages/client/src'].flatMap(sources);
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(KIND)) {
      // A kind's name is written out (minifiers rename classes): it must be the class's own.
      expect(m[3], `${relative(root, file)}: ${m[2]}'s kind name`).toBe(m[2]);
      out.push({
        name: m[2] as string,
        parent: m[5] ?? 'PacelineError',
        exported: m[1] !== undefined,
        file: relative(root, file),
        code: m[4] as string,
      });
    }
    for (const m of text.matchAll(
      /^(export )?(?:abstract )?class (\w+) extends (?!errorKind\b|inputErrorKind\b)(\w+)[^{]*\{(\}|[\s\S]*?^\})/gm,
    )) {
      const code = /readonly code(?:: string)? = '([^']+)'/.exec(m[4] as string)?.[1];
      out.push({
        name: m[2] as string,
        parent: m[3] as string,
        exported: m[1] !== undefined,
        file: relative(root, file),
        ...(code ? { code } : {}),
      });
    }
  }
  return out;
}

describe('PacelineError', () => {
  const all = classes();
  const byName = new Map(all.map((c) => [c.name, c]));
  /** The chain of parents up to a class the scan did not find (Error, PacelineError, …). */
  const rootOf = (c: ClassDecl): string => {
    let at: ClassDecl | undefined = c;
    let parent = c.parent;
    for (let hops = 0; at && hops < 20; hops++) {
      parent = at.parent;
      at = parent === 'PacelineError' ? undefined : byName.get(parent);
    }
    return parent;
  };
  const errors = all.filter((c) => c.exported && /Error$/.test(c.name) && c.name !== 'PacelineError');

  it('is the base of every exported error class of the product code', () => {
    expect(errors.length).toBeGreaterThanOrEqual(55);
    const strays = errors
      .filter((c) => rootOf(c) !== 'PacelineError')
      .map((c) => `${c.file}: ${c.name} extends ${c.parent}`);
    expect(strays).toEqual([]);
    // The scan finds what it must: a direct subclass, one through a family, and one in local/.
    expect(byName.get('BudgetValidationError')?.parent).toBe('PacelineError');
    expect(rootOf(byName.get('SpendSchemaError') as ClassDecl)).toBe('PacelineError');
    expect(byName.get('PortInUseError')?.parent).toBe('PacelineError');
  });

  it('declares distinct, well-formed codes', () => {
    const codes = all.filter((c) => c.code !== undefined).map((c) => c.code as string);
    expect(codes.length).toBeGreaterThanOrEqual(50);
    for (const code of codes) expect(code).toMatch(/^[a-z]+(\.[a-z0-9-]+)+$/);
    expect(codes.length - new Set(codes).size, 'duplicate codes').toBe(0);
  });

  it('keeps each class its name, its instanceof and a stable code', () => {
    const budget = new BudgetValidationError('pacingMode', 'bad');
    expect(budget).toBeInstanceOf(BudgetValidationError);
    expect(budget).toBeInstanceOf(PacelineError);
    expect(budget).toBeInstanceOf(Error);
    expect(budget).toMatchObject({
      name: 'BudgetValidationError',
      code: 'budget.invalid',
      message: 'pacingMode: bad',
    });
    expect(new InvalidDayError('x')).toMatchObject({ name: 'InvalidDayError', code: 'budget.invalid-day' });
    expect(new InvalidBidInputError('x')).toMatchObject({
      name: 'InvalidBidInputError',
      code: 'client.invalid-bid-input',
    });
    expect(new UnknownPacingModeError('fast', 'x').code).toBe('pacing.unknown-mode');
    // Families with finer reasons: the reason is the code.
    const record = new ActionEventError('counting.unknown-version', undefined, 'x');
    expect(record).toBeInstanceOf(MalformedRecordError);
    expect(record).toBeInstanceOf(PacelineError);
    expect(record.code).toBe('counting.unknown-version');
    expect(new SpendSchemaError('spend.schema', 'x').code).toBe('spend.schema');
    expect(new KinesisPutError('ProvisionedThroughputExceededException', 'x').code).toBe(
      'ProvisionedThroughputExceededException',
    );
  });

  it('declares kinds with their base, name, code and the input they name', () => {
    class DiskFullError extends errorKind('DiskFullError', 'test.disk-full') {}
    const full = new DiskFullError('no room', { cause: 'ENOSPC' });
    expect(full).toBeInstanceOf(PacelineError);
    expect(full).toMatchObject({
      name: 'DiskFullError',
      code: 'test.disk-full',
      message: 'no room',
      cause: 'ENOSPC',
    });
    const script = new RawScriptError('ERR x');
    expect(script).toBeInstanceOf(RawRedisError);
    expect(script).toBeInstanceOf(PacelineError);
    expect(script.name).toBe('RawScriptError');
    class OffsetError extends inputErrorKind<'offset', number>(
      'OffsetError',
      'test.offset',
      'offset',
      (o) => `@${o}: `,
    ) {}
    const offset = new OffsetError(7, 'bad');
    expect(offset).toBeInstanceOf(PacelineError);
    expect(offset).toMatchObject({ name: 'OffsetError', code: 'test.offset', offset: 7, message: '@7: bad' });
    const settings = new InvalidDeploymentSettingsError('paceline:stage', 'too long');
    expect(settings.key).toBe('paceline:stage');
    expect(settings.message).toBe('cdk.json context paceline:stage: too long');
    expect(Object.keys(settings)).toContain('key');
  });
});

/**
 * The exit codes operators script against: docs/runbook.md's table, `EXIT` in cli/common.ts and
 * the `--help` texts say the same, and no command returns a code outside the table.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXIT, EXIT_HELP } from '../../../cli/common.js';
import { EXIT_NOT_CONFIRMED } from '../../../cli/paceline/switch.js';
import { BUDGETS_USAGE } from '../../../cli/usage.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** The runbook's exit-code table: code → meaning. */
function runbookTable(): Map<number, string> {
  const text = readFileSync(join(root, 'docs/runbook.md'), 'utf8');
  const rows = [...text.matchAll(/^\| (\d) \| (.+) \|$/gm)];
  return new Map(rows.map((m) => [Number(m[1]), m[2] as string]));
}

/** The word each code's meaning starts with, in the table and in every help text. */
const meaning: Record<keyof typeof EXIT, RegExp> = {
  ok: /^ok/,
  failure: /^unexpected/,
  usage: /^usage/,
  notFound: /^not found/,
  conflict: /^conflict/,
  partial: /^partial/,
  unreachable: /^a store .*could not be reached/,
  verdictFailed: /^a benchmark target .*missed/,
};

describe('exit codes', () => {
  it("docs/runbook.md's table lists exactly EXIT's codes, each with its meaning", () => {
    const table = runbookTable();
    expect([...table.keys()].sort()).toEqual(Object.values(EXIT).sort());
    for (const [name, code] of Object.entries(EXIT) as [keyof typeof EXIT, number][]) {
      expect(table.get(code), name).toMatch(meaning[name]);
    }
  });

  it('the help texts name the same codes with the same meanings', () => {
    for (const [name, code] of Object.entries(EXIT) as [keyof typeof EXIT, number][]) {
      const m = new RegExp(`\\b${code} (\\D+?)(,|\\n|$)`).exec(EXIT_HELP);
      expect(m?.[1], `${name} in EXIT_HELP`).toMatch(meaning[name]);
    }
    const budgets = /exit codes: (.*)/.exec(BUDGETS_USAGE)?.[1] ?? '';
    for (const [code, text] of budgets.split(', ').map((p) => [Number(p[0]), p.slice(2)] as const)) {
      const name = (Object.entries(EXIT) as [keyof typeof EXIT, number][]).find(([, c]) => c === code)?.[0];
      expect(name, `budgets help code ${code}`).toBeDefined();
      expect(text, `budgets help code ${code}`).toMatch(meaning[name as keyof typeof EXIT]);
    }
  });

  it('a switch not confirmed within --wait is a partial outcome (5), not a conflict', () => {
    expect(EXIT_NOT_CONFIRMED).toBe(EXIT.partial);
  });

  it('no command returns a number outside the table', () => {
    const files = readdirSync(join(root, 'cli'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts'))
      .map((e) => join(e.parentPath, e.name));
    const codes = new Set<number>(Object.values(EXIT));
    const stray: string[] = [];
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\b(?:return|exit(?:Code)?\s*[=(])\s*(\d+)\b/g)) {
        if (!codes.has(Number(m[1]))) stray.push(`${file.slice(root.length)}: ${m[0]}`);
      }
    }
    expect(stray).toEqual([]);
  });
});

/**
 * The `.lua` files of this folder as the registry (registry.ts) reads them when the TypeScript runs
 * from the repository (tsx, vitest, `node --import tsx`): from disk, next to this module, so an
 * edited script is what the next run sends. Bundles resolve `#lua-files` to files.bundled.ts
 * instead (package.json `imports`, condition `paceline-bundle`), which carries the same text.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The text of `name` (a file of this folder, e.g. `spend-lease.lua`). */
export function luaFile(name: string): string {
  const url = new URL(`./${name}`, import.meta.url);
  try {
    return readFileSync(url, 'utf8');
  } catch (error) {
    throw new Error(
      `Lua script file ${fileURLToPath(url)} cannot be read (${(error as NodeJS.ErrnoException).code}): ` +
        'a bundle must be built with the `paceline-bundle` condition and the `.lua` text loader ' +
        '(shared/redis/scripts/registry.ts)',
    );
  }
}

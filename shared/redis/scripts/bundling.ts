/**
 * What every esbuild bundle of Paceline code needs for the Lua scripts of this folder: the
 * `paceline-bundle` condition, under which package.json's `imports` entry `#lua-files` resolves to
 * files.bundled.ts (the files' text inside the bundle) instead of files.ts (read from disk beside
 * the sources), and the `text` loader for `.lua` files. No imports: the CDK app and the build
 * scripts read it without loading the registry.
 *
 * esbuild stops adding its default `module` condition once custom conditions are given, so it is
 * listed here: the bundles pick the same builds of their packages as without the condition.
 */

/** esbuild's `conditions` for a bundle of Paceline code. */
export const LUA_BUNDLE_CONDITIONS: readonly string[] = ['paceline-bundle', 'module'];

/** esbuild's `loader` entries for a bundle of Paceline code. */
export const LUA_BUNDLE_LOADER: Readonly<Record<string, 'text'>> = { '.lua': 'text' };

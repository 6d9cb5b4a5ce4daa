#!/usr/bin/env node
// `npx paceline …`: registers tsx (a devDependency of this repository) and runs the TypeScript CLI.
// The operator CLI runs from a checkout (docs/client.md, Limits): a copy without the TypeScript
// sources beside it says so and exits 2 instead of failing on a missing module.
import { existsSync } from 'node:fs';

const cli = new URL('./paceline.ts', import.meta.url);
if (!existsSync(cli)) {
  console.error(
    'paceline: the operator CLI runs from a checkout of the Paceline repository (git clone, npm ci, then ' +
      '`npx paceline …` there); this installed package carries the client library (paceline/client) only.',
  );
  process.exit(2);
}
const { register } = await import('tsx/esm/api');
register();
const { runFromProcess } = await import(cli.href);
await runFromProcess();

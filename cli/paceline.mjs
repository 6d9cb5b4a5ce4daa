#!/usr/bin/env node
// `npx paceline …`: registers tsx (from this package) and runs the TypeScript CLI.
import { register } from 'tsx/esm/api';

register();
const { runFromProcess } = await import('./paceline.ts');
await runFromProcess();

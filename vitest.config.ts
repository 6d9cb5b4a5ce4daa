import { defineConfig } from 'vitest/config';

/**
 * Three tiers, each its own project so CI can run them as separate steps:
 * - unit: pure logic, no network, no child processes;
 * - integration: real redis-server, dynalite, kinesalite and the local SSM endpoint,
 *   each test file starting the servers it needs on free loopback ports;
 * - soak: multi-process, time-compressed simulations (`*.soak.test.ts`), run alone;
 * - synth: the CDK app synthesized once per file (esbuild bundling costs seconds).
 */
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], environment: 'node' } },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: ['test/integration/**/*.soak.test.ts', 'test/integration/**/*.quality.test.ts'],
          environment: 'node',
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // Two cores: servers + test bodies compete for CPU; keep files from starving each other.
          maxWorkers: 2,
        },
      },
      {
        // Real-time simulations with several OS processes (e.g. the overshoot test's bidders):
        // they measure behaviour under a time-compressed day, so they run alone, one file at a
        // time, after the other integration tests, never competing with them for the 2 cores.
        // Also the simulated pacing days (test/integration/pacing): deterministic, but each keeps
        // a core busy for minutes, which starves timing-sensitive integration tests beside it.
        test: {
          name: 'soak',
          include: ['test/integration/**/*.soak.test.ts'],
          environment: 'node',
          testTimeout: 180_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        // The simulator's pacing-quality runs (issue 10): every strategy over a shipped scenario's
        // days, several minutes of CPU each. Not part of `npm test` (hours on this machine, and
        // issue 10's bounds do not hold on every scenario yet: docs/pacing-quality.md); run with
        // `npm run test:quality`.
        test: {
          name: 'quality',
          include: ['test/integration/**/*.quality.test.ts'],
          environment: 'node',
          testTimeout: 3_600_000,
          hookTimeout: 3_600_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'synth',
          include: ['test/synth/**/*.test.ts'],
          environment: 'node',
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});

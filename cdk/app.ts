/**
 * The CDK app: one identical RegionalStack per region. `npm run synth` synthesizes offline (the
 * availability zones are committed in cdk.json), `npx cdk deploy Paceline-us-east-1` deploys one.
 *
 * cdk-nag's AwsSolutions pack runs as a validation plugin on every synth.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { defaultRegions } from '../shared/region/resources.js';
import { RegionalStack } from './regional-stack.js';

/** Builds the app; exported for the synth tests. */
export function buildApp(app = new App()): { app: App; stacks: RegionalStack[] } {
  const account = (app.node.tryGetContext('paceline:account') as string | undefined) ?? '123456789012';
  const regions = (app.node.tryGetContext('paceline:regions') as string[] | undefined) ?? [...defaultRegions];
  // `-c paceline:pacerShards=32` (and …InstancesPerShard) resize the pacer: the schedule rules,
  // override parameters and env follow from the region description. Changing N on a live region
  // needs the re-shard procedure (docs/pacing.md).
  const pacer = {
    ...contextInt(app, 'paceline:pacerShards', 'shards'),
    ...contextInt(app, 'paceline:pacerInstancesPerShard', 'instancesPerShard'),
  };
  const stacks = regions.map(
    (region) =>
      new RegionalStack(app, `Paceline-${region}`, {
        env: { account, region },
        description: `Paceline regional stack (${region}): pacing, spend tracking, action counting`,
        pacer,
      }),
  );
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stacks };
}

function contextInt<K extends string>(app: App, key: string, field: K): Partial<Record<K, number>> {
  const raw = app.node.tryGetContext(key) as string | number | undefined;
  if (raw === undefined) return {};
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new Error(`Context ${key}=${String(raw)} must be a whole number.`);
  return { [field]: value } as Partial<Record<K, number>>;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  buildApp().app.synth();
}

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
  const stacks = regions.map(
    (region) =>
      new RegionalStack(app, `Paceline-${region}`, {
        env: { account, region },
        description: `Paceline regional stack (${region}): pacing, spend tracking, action counting`,
      }),
  );
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stacks };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  buildApp().app.synth();
}

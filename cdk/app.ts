/**
 * The CDK app: one identical RegionalStack per region. `npm run synth` synthesizes offline (the
 * availability zones are committed in cdk.json), `npx cdk deploy Paceline-us-east-1` deploys one.
 * Regions and their settings come from cdk.json context, read and validated in one place
 * (shared/region/deployment.ts).
 *
 * Two validation plugins run on every synth (`npm run synth`, CI, the synth tests): cdk-nag's
 * AwsSolutions pack and AWS's Control Tower guard rules through cfn-guard (cdk/guard.ts). Every
 * finding is fixed or acknowledged on its resource (cdk/nag.ts); any other fails synthesis.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { deploymentSettings } from '../shared/region/deployment.js';
import { ControlTowerGuard } from './guard.js';
import { RegionalStack } from './regional-stack.js';

/** Options of {@link buildApp}. */
export interface BuildAppOptions {
  /**
   * Register the policy-validation plugins (cdk-nag) that run at synth. Only tools that read the
   * synthesized template and never deploy it turn them off (the local IAM layer: they cost
   * seconds per synth). @default true
   */
  readonly validate?: boolean;
}

/** Builds the app; exported for the synth tests and the local IAM layer (local/iam/synth.ts). */
export function buildApp(
  app = new App(),
  options: BuildAppOptions = {},
): { app: App; stacks: RegionalStack[] } {
  const deployment = deploymentSettings((key) => app.node.tryGetContext(key));
  const stacks = deployment.regions.map(
    (deployed) =>
      new RegionalStack(app, deployed.description.names.stackName(deployed.region), {
        env: { account: deployment.account, region: deployed.region },
        description: `Paceline regional stack (${deployed.description.names.base}, ${deployed.region}): pacing, spend tracking, action counting`,
        deployment,
        deployed,
      }),
  );
  if (options.validate !== false)
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app), new ControlTowerGuard());
  return { app, stacks };
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop() ?? '')) {
  try {
    buildApp().app.synth();
  } catch (error) {
    // A settings error is the operator's to fix: one line naming the key, no stack trace.
    if ((error as Error).name === 'InvalidDeploymentSettingsError') {
      console.error((error as Error).message);
      process.exit(2);
    }
    throw error;
  }
}

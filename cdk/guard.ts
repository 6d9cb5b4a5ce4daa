/**
 * AWS's own rules at synth: the Control Tower proactive controls, run by cfn-guard
 * (`@cdklabs/cdk-validator-cfnguard`, which ships the cfn-guard binary and the rules) as a CDK
 * policy-validation plugin beside cdk-nag, on every template of the app — nested stacks
 * included, which CDK does not hand to plugins itself (the pacer's shards live in nested stacks).
 *
 * Findings are fixed or acknowledged on their resource with a reason (cdk/nag.ts,
 * `acknowledgeGuard`); CDK applies the acknowledgements and fails synthesis on any other.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CfnGuardValidator } from '@cdklabs/cdk-validator-cfnguard';
import type {
  IPolicyValidationContextBeta1,
  IPolicyValidationPluginBeta1,
  PolicyValidationPluginReportBeta1,
} from 'aws-cdk-lib';

/** The plugin's name: the namespace of its rule ids in acknowledgements (`<name>::<rule>`). */
export const GUARD_PLUGIN_NAME = 'cdk-validator-cfnguard';

/**
 * cfn-guard's JSON output for a 256-shard app is tens of MB; Node's default 1 MB buffer would
 * kill the process.
 */
const GUARD_OUTPUT_BUFFER_BYTES = 512 * 1024 * 1024;

/** The Control Tower guard rules over every template, nested ones included. */
export class ControlTowerGuard implements IPolicyValidationPluginBeta1 {
  readonly name = GUARD_PLUGIN_NAME;
  readonly version?: string;
  readonly ruleIds?: string[];
  private readonly guard: CfnGuardValidator;

  constructor() {
    this.guard = new CfnGuardValidator({ maxBuffer: GUARD_OUTPUT_BUFFER_BYTES });
    this.version = this.guard.version;
    this.ruleIds = this.guard.ruleIds;
  }

  validate(context: IPolicyValidationContextBeta1): PolicyValidationPluginReportBeta1 {
    const templatePaths = [...context.templatePaths, ...nestedTemplatePaths(context.templatePaths)];
    return this.guard.validate({ ...context, templatePaths });
  }
}

/**
 * The nested stacks' templates beside the given stack templates (CDK writes them to the same
 * assembly directory as `<id>.nested.template.json`). Every stack of the app is validated in the
 * same run, so each nested template belongs to one of them.
 */
function nestedTemplatePaths(templatePaths: readonly string[]): string[] {
  return [...new Set(templatePaths.map((p) => dirname(p)))].flatMap((dir) =>
    readdirSync(dir)
      .filter((file) => file.endsWith('.nested.template.json'))
      .map((file) => join(dir, file)),
  );
}

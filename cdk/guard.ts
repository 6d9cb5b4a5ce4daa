/**
 * AWS's own rules at synth: the Control Tower proactive controls, run by cfn-guard
 * (`@cdklabs/cdk-validator-cfnguard`, which ships the cfn-guard binary and the rules) as a CDK
 * policy-validation plugin beside cdk-nag, on every template of the app — nested stacks
 * included, which CDK does not hand to plugins itself (the pacer's shards live in nested stacks).
 *
 * Findings are fixed or acknowledged on their resource with a reason (cdk/nag.ts,
 * `acknowledgeGuard`); CDK applies the acknowledgements and fails synthesis on any other.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
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

/** The bundled Control Tower rules: one `.guard` file per rule, in a folder per service. */
const RULES_DIR = join(
  dirname(createRequire(import.meta.url).resolve('@cdklabs/cdk-validator-cfnguard/package.json')),
  'rules/control-tower/cfn-guard',
);

/**
 * The resource types each bundled rule reports on (its header's "Reports on:" list), by rule file
 * name. A rule whose types are all absent from the templates would only SKIP: it is not run, which
 * keeps a synth of hundreds of resources from spending minutes in cfn-guard.
 */
function rulesByType(): Map<string, readonly string[]> {
  const out = new Map<string, readonly string[]>();
  for (const service of readdirSync(RULES_DIR)) {
    for (const file of readdirSync(join(RULES_DIR, service))) {
      if (!file.endsWith('.guard')) continue;
      const lines = readFileSync(join(RULES_DIR, service, file), 'utf8').split('\n');
      const at = lines.findIndex((l) => /^#\s*Reports on:/.test(l));
      const types: string[] = [];
      for (let i = at + 1; at >= 0 && i < lines.length; i++) {
        const m = /^#\s+(AWS::\S+)/.exec(lines[i] as string);
        if (!m) break;
        types.push(m[1] as string);
      }
      out.set(basename(file, '.guard'), types);
    }
  }
  return out;
}

/** The Control Tower guard rules over every template, nested ones included. */
export class ControlTowerGuard implements IPolicyValidationPluginBeta1 {
  readonly name = GUARD_PLUGIN_NAME;
  readonly version?: string;
  readonly ruleIds?: string[];
  private readonly rules = rulesByType();

  constructor() {
    const all = new CfnGuardValidator();
    this.version = all.version;
    this.ruleIds = all.ruleIds;
  }

  validate(context: IPolicyValidationContextBeta1): PolicyValidationPluginReportBeta1 {
    const templatePaths = [...context.templatePaths, ...nestedTemplatePaths(context.templatePaths)];
    // cfn-guard reads every template once per rule: each template gets only the rules about
    // resource types it holds (a rule with no "Reports on" types — none today — always runs);
    // templates with the same rules share one run.
    const runs = new Map<string, { disabledRules: string[]; templatePaths: string[] }>();
    for (const path of templatePaths) {
      const present = new Set(
        Object.values(
          (JSON.parse(readFileSync(path, 'utf8')) as { Resources?: Record<string, { Type: string }> })
            .Resources ?? {},
        ).map((r) => r.Type),
      );
      const disabledRules = [...this.rules]
        .filter(([, types]) => types.length > 0 && !types.some((t) => present.has(t)))
        .map(([rule]) => rule);
      const key = disabledRules.join(',');
      const run = runs.get(key) ?? { disabledRules, templatePaths: [] };
      run.templatePaths.push(path);
      runs.set(key, run);
    }
    const reports = [...runs.values()]
      .filter((run) => run.disabledRules.length < this.rules.size)
      .map((run) =>
        new CfnGuardValidator({
          maxBuffer: GUARD_OUTPUT_BUFFER_BYTES,
          disabledRules: run.disabledRules,
        }).validate({
          ...context,
          templatePaths: run.templatePaths,
        }),
      );
    return {
      success: reports.every((r) => r.success),
      violations: reports.flatMap((r) => r.violations),
    };
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

/**
 * What every part of the deployment settings' validation shares (deployment.ts and its
 * `deployment-*.ts` parts): the error naming the bad context key, and the checks of a value's
 * kind.
 */
import { inputErrorKind } from '../errors.js';

/** A context value that cannot work; the message names the key. */
export class InvalidDeploymentSettingsError extends inputErrorKind(
  'InvalidDeploymentSettingsError',
  'region.invalid-deployment-settings',
  'key',
  (key) => `cdk.json context ${key}: `,
) {}

/** A plain object (not null, not a list). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A whole number from a number or a numeric string (`-c` values are strings). */
export function wholeNumber(key: string, v: unknown): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n))
    throw new InvalidDeploymentSettingsError(key, `${JSON.stringify(v)} is not a whole number.`);
  return n;
}

/** Refuses a key of `v` not in `allowed`, naming it. */
export function only(key: string, v: Record<string, unknown>, allowed: readonly string[]): void {
  for (const k of Object.keys(v)) {
    if (!allowed.includes(k))
      throw new InvalidDeploymentSettingsError(
        `${key}.${k}`,
        `unknown setting (allowed: ${allowed.join(', ')}).`,
      );
  }
}

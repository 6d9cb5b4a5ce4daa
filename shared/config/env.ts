/**
 * Environment access for handlers and tools. Read each variable once, at module load, through
 * these helpers so a missing setting fails the cold start with a message naming the variable,
 * instead of surfacing later as `undefined` deep inside a request.
 */
import { PacelineError } from '../errors.js';

/** Thrown when a required environment variable is unset or empty. */
export class MissingEnvError extends PacelineError {
  override readonly name = 'MissingEnvError';
  override readonly code = 'config.missing-env';
  constructor(readonly variable: string) {
    super(
      `Environment variable ${variable} is not set. Set it in the function's environment ` +
        '(the CDK stack and the local runner both derive it from shared/region/resources.ts).',
    );
  }
}

/** Thrown when an environment variable is set but cannot be parsed. */
export class InvalidEnvError extends PacelineError {
  override readonly name = 'InvalidEnvError';
  override readonly code = 'config.invalid-env';
  constructor(
    readonly variable: string,
    readonly value: string,
    expected: string,
  ) {
    super(`Environment variable ${variable}=${JSON.stringify(value)} is invalid: expected ${expected}.`);
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** Returns the variable's value; throws {@link MissingEnvError} when unset or empty. */
export function requireEnv(name: string, env: Env = process.env): string {
  const value = env[name];
  if (value === undefined || value === '') throw new MissingEnvError(name);
  return value;
}

/** Returns the variable's value, or `fallback` when unset or empty. */
export function optionalEnv(name: string, fallback: string, env?: Env): string;
export function optionalEnv(name: string, fallback?: undefined, env?: Env): string | undefined;
export function optionalEnv(name: string, fallback?: string, env: Env = process.env): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? fallback : value;
}

/** Parses an integer variable; throws {@link InvalidEnvError} on anything but a safe integer. */
export function intEnv(name: string, fallback: number, env: Env = process.env): number {
  const raw = optionalEnv(name, undefined, env);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isSafeInteger(value)) throw new InvalidEnvError(name, raw, 'an integer');
  return value;
}

/** Parses a boolean variable (`true`/`false`/`1`/`0`). */
export function boolEnv(name: string, fallback: boolean, env: Env = process.env): boolean {
  const raw = optionalEnv(name, undefined, env);
  if (raw === undefined) return fallback;
  if (raw === 'true' || raw === '1') return true;
  if (raw === 'false' || raw === '0') return false;
  throw new InvalidEnvError(name, raw, 'true, false, 1 or 0');
}

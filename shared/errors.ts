/**
 * The base of every error Paceline throws on purpose: bad input, bad configuration, a store that
 * cannot be reached, a record that can never be processed. `catch (e) { if (e instanceof
 * PacelineError) … }` tells them from bugs and from errors of the libraries underneath (an
 * ioredis or AWS SDK error arrives as itself, or as the `cause` of one of these).
 *
 * Every subclass keeps its own name (`error.name`) and adds a stable `code`: machine-readable,
 * the same for every error of that kind across releases — match on it (or on the class), never on
 * the message, which is written for people and may be reworded. Codes are `<area>.<what>` in
 * lower case (`budget.invalid`, `pacing.unknown-mode`); an error that wraps a finer reason uses
 * that reason as its code (a malformed record's `reasonCode`, Kinesis's `ErrorCode`).
 */
export abstract class PacelineError extends Error {
  /** Stable, machine-readable kind of the failure (see the module comment). */
  abstract readonly code: string;
}

/** Options every Paceline error takes besides its message (the `cause`, as `Error`'s). */
export interface PacelineErrorOptions {
  readonly cause?: unknown;
}

/** The constructor of a {@link PacelineError} kind that takes a message: what {@link errorKind} extends. */
export type PacelineErrorBase = abstract new (
  message?: string,
  options?: PacelineErrorOptions,
) => PacelineError;

/**
 * A {@link PacelineError} as a type with its `code` given (not abstract): what the kinds
 * {@link errorKind} and {@link inputErrorKind} declare are, so a class extending one is complete.
 */
export interface PacelineErrorKind extends Error {
  readonly code: string;
}

/** The constructor {@link errorKind} returns. */
export type PacelineErrorKindConstructor = abstract new (
  message?: string,
  options?: PacelineErrorOptions,
) => PacelineErrorKind;

/**
 * Declares a kind of error: `export class StoreDownError extends errorKind('StoreDownError',
 * 'store.down') {}` is a subclass of `base` (a {@link PacelineError} by default) with that `name`
 * and `code`. The name is written out, not read from the class, because a minifier renames
 * classes. A kind that carries more than a message is a class body on top of it, or an
 * {@link inputErrorKind}.
 */
export function errorKind(
  name: string,
  code: string,
  base: PacelineErrorBase = PacelineError,
): PacelineErrorKindConstructor {
  abstract class Kind extends base {
    override readonly name: string = name;
    override readonly code: string = code;
  }
  return Kind;
}

/** The constructor {@link inputErrorKind} returns: the input's name (`subject`) comes first. */
export type InputErrorConstructor<K extends string, S> = new (
  subject: S,
  message: string,
  options?: PacelineErrorOptions,
) => PacelineErrorKind & { readonly [P in K]: S };

/**
 * Declares a kind of error about one input a caller can point at — a record or budget field, a
 * cdk.json context key, a scenario's JSON path, a query position, a pacing mode id — kept as
 * property `key` (`field`, `position`, `mode`…) so a tool can show the input without parsing the
 * message. `label` turns the subject into the message's prefix (none by default):
 *
 * ```ts
 * export class BudgetValidationError extends inputErrorKind('BudgetValidationError', 'budget.invalid', 'field', (f) => `${f}: `) {}
 * new BudgetValidationError('dailyCap', 'must be > 0').field; // 'dailyCap'
 * ```
 */
export function inputErrorKind<K extends string, S extends string | number = string>(
  name: string,
  code: string,
  key: K,
  label: (subject: S) => string = () => '',
): InputErrorConstructor<K, S> {
  class InputError extends PacelineError {
    override readonly name: string = name;
    override readonly code: string = code;
    constructor(subject: S, message: string, options?: PacelineErrorOptions) {
      super(label(subject) + message, options);
      Object.defineProperty(this, key, { value: subject, enumerable: true });
    }
  }
  return InputError as unknown as InputErrorConstructor<K, S>;
}

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

/**
 * The errors of the raw RESP layer (shared/redis/resp/), one base for all of them:
 * `catch (e) { if (e instanceof RawRedisError) … }` tells a failure of a raw call (refused AUTH,
 * silent node, error reply, broken connection) from a bug, and each kind keeps its own class and
 * `code`. Every message names the node or the call and says what to do.
 */
import { PacelineError } from '../../errors.js';

/** Base of every error a raw Redis call fails with. */
export abstract class RawRedisError extends PacelineError {}

/** A node refused the `AUTH` of a raw connection; the message has the node's reply. */
export class RawRedisAuthError extends RawRedisError {
  override readonly name = 'RawRedisAuthError';
  override readonly code = 'redis.auth';
}

/**
 * A raw call (read or script) Redis did not answer in time: the node sent nothing for the
 * connection's `timeoutMs` while a reply was due (a paused, hung or overloaded node). The
 * connection is dropped; the next call opens a new one.
 */
export class RawReadTimeoutError extends RawRedisError {
  override readonly name = 'RawReadTimeoutError';
  override readonly code = 'redis.read-timeout';
}

/** An error reply to a raw read (the node's error line, e.g. `WRONGTYPE …`). */
export class RawReplyError extends RawRedisError {
  override readonly name = 'RawReplyError';
  override readonly code = 'redis.reply';
}

/** An error reply to a raw script call (the node's error line, e.g. `ERR user_script:3: …`). */
export class RawScriptError extends RawRedisError {
  override readonly name = 'RawScriptError';
  override readonly code = 'redis.script';
}

/**
 * A raw connection closed or failed (socket error, closed by the node) while calls waited on
 * it; whether a waiting script ran is unknown. The next call opens a new connection.
 */
export class RawConnectionError extends RawRedisError {
  override readonly name = 'RawConnectionError';
  override readonly code = 'redis.connection';
}

/**
 * A raw reader's or script caller's `timeoutMs` option is not a positive number of ms: a
 * configuration error, not a failed call (so not a {@link RawRedisError}).
 */
export class InvalidRawTimeoutError extends PacelineError {
  override readonly name = 'InvalidRawTimeoutError';
  override readonly code = 'redis.invalid-timeout';
}

/** The node sent bytes that are not a RESP reply to what was asked; the connection is dropped. */
export class RawProtocolError extends RawRedisError {
  override readonly name = 'RawProtocolError';
  override readonly code = 'redis.protocol';
}

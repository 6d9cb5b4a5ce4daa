/**
 * The errors of the raw RESP layer (shared/redis/resp/), one base for all of them:
 * `catch (e) { if (e instanceof RawRedisError) … }` tells a failure of a raw call (refused AUTH,
 * silent node, error reply, broken connection) from a bug, and each kind keeps its own class and
 * `code`. Every message names the node or the call and says what to do.
 */
import { errorKind, PacelineError } from '../../errors.js';

/** Base of every error a raw Redis call fails with. */
export abstract class RawRedisError extends PacelineError {}

/** A node refused the `AUTH` of a raw connection; the message has the node's reply. */
export class RawRedisAuthError extends errorKind('RawRedisAuthError', 'redis.auth', RawRedisError) {}

/**
 * A raw call (read or script) Redis did not answer in time: the node sent nothing for the
 * connection's `timeoutMs` while a reply was due (a paused, hung or overloaded node). The
 * connection is dropped; the next call opens a new one.
 */
export class RawReadTimeoutError extends errorKind(
  'RawReadTimeoutError',
  'redis.read-timeout',
  RawRedisError,
) {}

/** An error reply to a raw read (the node's error line, e.g. `WRONGTYPE …`). */
export class RawReplyError extends errorKind('RawReplyError', 'redis.reply', RawRedisError) {}

/** An error reply to a raw script call (the node's error line, e.g. `ERR user_script:3: …`). */
export class RawScriptError extends errorKind('RawScriptError', 'redis.script', RawRedisError) {}

/**
 * A raw connection closed or failed (socket error, closed by the node) while calls waited on
 * it; whether a waiting script ran is unknown. The next call opens a new connection.
 */
export class RawConnectionError extends errorKind('RawConnectionError', 'redis.connection', RawRedisError) {}

/**
 * A raw reader's or script caller's `timeoutMs` option is not a positive number of ms: a
 * configuration error, not a failed call (so not a {@link RawRedisError}).
 */
export class InvalidRawTimeoutError extends errorKind('InvalidRawTimeoutError', 'redis.invalid-timeout') {}

/** The node sent bytes that are not a RESP reply to what was asked; the connection is dropped. */
export class RawProtocolError extends errorKind('RawProtocolError', 'redis.protocol', RawRedisError) {}

/**
 * The cap log's format (shared/counting/cap-log.ts) and its reader's refusals: tuples are shared
 * by the events that carry the same entities, and a damaged cap log is refused with an error that
 * says how to rebuild it, never read as other counts. That its verdicts equal the log's (and the
 * brute-force reference's) is in caps-reference.test.ts; that the ingest script writes exactly
 * `capLogOf` of the log is in test/integration/counting/cap-log.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  CAP_LOG_ENTITY_OFFSET,
  CAP_LOG_EVENT_BYTES,
  CAP_LOG_KEPT,
  CAP_LOG_NOT_KEPT,
  capLogOf,
} from '../../../shared/counting/cap-log.js';
import { evaluateCapLog } from '../../../shared/counting/caps.js';
import { decodeRecord } from '../../../shared/counting/event-decode.js';
import { encodeActionEvent } from '../../../shared/counting/event-encode.js';
import { UnreadableEventLogError } from '../../../shared/counting/event-log.js';
import { actionEventSchema } from '../../../shared/counting/schema.js';
import { DAY_MS } from '../../../shared/time/clock.js';

const now = Date.UTC(2026, 10, 29, 12);

function member(ad: number, i: number, action: 'impression' | 'click' = 'impression'): Buffer {
  return decodeRecord(
    encodeActionEvent({
      userId: 5,
      timestamp: now - 1000 * i,
      insertionId: Buffer.alloc(16, i + 1),
      action,
      viewType: 'home',
      ad,
      adGroup: 10,
      campaign: 100,
      advertiser: 1000,
    }),
  ).member;
}

const candidates = [
  {
    id: 'a',
    entities: { ad: 1, adGroup: 10, campaign: 100, advertiser: 1000 },
    caps: [
      { level: 'ad', windowMs: DAY_MS, max: 10 },
      { level: 'campaign', windowMs: DAY_MS, max: 10 },
    ],
  },
];

describe('cap log format', () => {
  it('an event is 10 bytes; events with the same entities share one tuple', () => {
    const log = Buffer.concat([member(1, 0), member(2, 1), member(1, 2, 'click'), member(1, 3)]);
    const capLog = capLogOf(log, actionEventSchema);
    const tupleBytes = 2 + 1 + (log.length / 4 - CAP_LOG_ENTITY_OFFSET);
    expect(capLog[0]).toBe(CAP_LOG_KEPT);
    expect(capLog.length).toBe(1 + 2 * tupleBytes + 4 * CAP_LOG_EVENT_BYTES);
    const result = evaluateCapLog(capLog, candidates, now, now - 30 * DAY_MS);
    expect(result.allowed[0]?.strictest).toMatchObject({ count: 3 });
  });

  it('a log with a layout the schema does not know gives the not-kept marker', () => {
    const log = Buffer.concat([member(1, 0), Buffer.from([99, 1, 2, 3])]);
    expect([...capLogOf(log, actionEventSchema)]).toEqual([CAP_LOG_NOT_KEPT]);
  });

  it('a damaged cap log is refused, naming the byte and how to rebuild it', () => {
    const capLog = capLogOf(Buffer.concat([member(1, 0), member(2, 1)]), actionEventSchema);
    const read = (buf: Buffer) => () => evaluateCapLog(buf, candidates, now, now - 30 * DAY_MS);
    // Cut inside the last event, inside a tuple, and an event naming a tuple not defined yet.
    expect(read(capLog.subarray(0, capLog.length - 3))).toThrow(UnreadableEventLogError);
    expect(read(capLog.subarray(0, capLog.length - 3))).toThrow(
      /corrupt at byte \d+: an event is cut short.*rebuilds/,
    );
    expect(read(capLog.subarray(0, 10))).toThrow(/a tuple is cut short/);
    const early = Buffer.concat([
      Buffer.of(CAP_LOG_KEPT),
      capLog.subarray(capLog.length - CAP_LOG_EVENT_BYTES),
    ]);
    early.writeUInt16BE(7, 1);
    expect(read(early)).toThrow(/names tuple 7 of 0/);
    // A tuple of a layout version the reader does not know.
    const unknown = Buffer.from(capLog);
    unknown[3] = 99;
    expect(read(unknown)).toThrow(/layout v99/);
  });
});

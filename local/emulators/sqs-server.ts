/**
 * A local SQS endpoint speaking the AWS JSON 1.0 protocol `@aws-sdk/client-sqs` uses, for what
 * Paceline's tools need from an on-failure queue: CreateQueue, GetQueueUrl, SendMessage,
 * ReceiveMessage (visibility timeout), DeleteMessage, GetQueueAttributes (message counts). No
 * npm package emulates SQS's JSON protocol offline; the local runtime itself writes on-failure
 * records to files, so this endpoint exists to test the AWS path of `dead-letters redrive`
 * against the real SDK client. MD5 digests are computed as SQS does (the SDK verifies them).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Clock } from '../../shared/time/clock.js';
import { systemClock } from '../../shared/time/clock.js';
import { closeServer, listenLoopback } from './net.js';

interface Message {
  readonly id: string;
  readonly body: string;
  visibleAt: number;
  receipt?: string;
  receives: number;
}

class SqsError extends Error {
  constructor(
    readonly type: string,
    readonly queryCode: string,
    message: string,
  ) {
    super(message);
  }
}

/** A running local SQS endpoint. */
export interface RunningSqs {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

const md5 = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');

/** In-memory queues with SQS's semantics; exported for unit tests. */
export class QueueStore {
  private readonly queues = new Map<string, Message[]>();
  constructor(
    private readonly baseUrl: () => string,
    private readonly clock: Clock = systemClock,
  ) {}

  private urlOf(name: string): string {
    return `${this.baseUrl()}/000000000000/${name}`;
  }

  private queue(url: unknown): Message[] {
    const name =
      String(url ?? '')
        .split('/')
        .pop() ?? '';
    const q = this.queues.get(name);
    if (!q) {
      throw new SqsError(
        'com.amazonaws.sqs#QueueDoesNotExist',
        'AWS.SimpleQueueService.NonExistentQueue',
        'The specified queue does not exist.',
      );
    }
    return q;
  }

  dispatch(operation: string, input: Record<string, unknown>): unknown {
    const now = this.clock.now();
    switch (operation) {
      case 'CreateQueue': {
        const name = String(input.QueueName);
        if (!this.queues.has(name)) this.queues.set(name, []);
        return { QueueUrl: this.urlOf(name) };
      }
      case 'GetQueueUrl': {
        this.queue(String(input.QueueName));
        return { QueueUrl: this.urlOf(String(input.QueueName)) };
      }
      case 'SendMessage': {
        const body = String(input.MessageBody ?? '');
        const id = randomUUID();
        this.queue(input.QueueUrl).push({ id, body, visibleAt: now, receives: 0 });
        return { MessageId: id, MD5OfMessageBody: md5(body) };
      }
      case 'ReceiveMessage': {
        const max = Math.min(10, Number(input.MaxNumberOfMessages ?? 1));
        const hide = Number(input.VisibilityTimeout ?? 30) * 1000;
        const out = [];
        for (const m of this.queue(input.QueueUrl)) {
          if (out.length >= max) break;
          if (m.visibleAt > now) continue;
          m.visibleAt = now + hide;
          m.receipt = randomUUID();
          m.receives++;
          out.push({ MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: md5(m.body), Body: m.body });
        }
        return out.length > 0 ? { Messages: out } : {};
      }
      case 'DeleteMessage': {
        const q = this.queue(input.QueueUrl);
        const i = q.findIndex((m) => m.receipt === input.ReceiptHandle);
        if (i < 0) {
          throw new SqsError(
            'com.amazonaws.sqs#ReceiptHandleIsInvalid',
            'ReceiptHandleIsInvalid',
            'The input receipt handle is invalid.',
          );
        }
        q.splice(i, 1);
        return {};
      }
      case 'GetQueueAttributes': {
        const q = this.queue(input.QueueUrl);
        const visible = q.filter((m) => m.visibleAt <= now).length;
        return {
          Attributes: {
            ApproximateNumberOfMessages: String(visible),
            ApproximateNumberOfMessagesNotVisible: String(q.length - visible),
          },
        };
      }
      default:
        throw new SqsError(
          'com.amazonaws.sqs#UnsupportedOperation',
          'AWS.SimpleQueueService.UnsupportedOperation',
          `${operation} is not emulated.`,
        );
    }
  }
}

/** Starts the endpoint on a free loopback port. */
export async function startSqsServer(
  options: {
    readonly clock?: Clock;
    /** Wraps the server's request handling before it listens (the local IAM gate). @default none */
    readonly guard?: (server: import('node:http').Server) => void;
  } = {},
): Promise<RunningSqs> {
  let base = '';
  const store = new QueueStore(() => base, options.clock);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const operation = String(req.headers['x-amz-target'] ?? '').replace(/^AmazonSQS\./, '');
      let status = 200;
      let body: unknown;
      const headers: Record<string, string> = { 'content-type': 'application/x-amz-json-1.0' };
      try {
        const text = Buffer.concat(chunks).toString('utf8');
        body = store.dispatch(operation, text ? (JSON.parse(text) as Record<string, unknown>) : {});
      } catch (error) {
        status = 400;
        const e =
          error instanceof SqsError
            ? error
            : new SqsError('com.amazonaws.sqs#InternalError', 'InternalError', String(error));
        headers['x-amzn-query-error'] = `${e.queryCode};Sender`;
        body = { __type: e.type, message: e.message };
      }
      res.writeHead(status, headers);
      res.end(JSON.stringify(body));
    });
  });
  options.guard?.(server);
  const { url, port } = await listenLoopback(server);
  base = url;
  return { url, port, stop: () => closeServer(server) };
}

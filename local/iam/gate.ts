/**
 * The local IAM gate: every request to a local AWS endpoint (dynalite, kinesalite, the SSM, SQS
 * and ElastiCache endpoints, s3rver) is authorized before the emulator sees it. The caller is the
 * principal its SigV4 access key id names (a function of a region, the ad-server client of a
 * region, or the operator, `local`, who is never checked); the request becomes IAM checks
 * (`requests.ts`), each evaluated against the principal's synthesized policies (`evaluate.ts`).
 * A refused request is answered with the service's own AccessDenied error — the shape the real
 * SDK parses into the exception AWS would raise (`AccessDeniedException` for DynamoDB, Kinesis and
 * SSM; S3's and ElastiCache's XML `AccessDenied`; SQS's `AccessDenied` query error) — and the
 * refusal is counted and reported. An access key no principal has is refused as AWS refuses an
 * unknown key. Signatures are not verified (s3rver verifies S3's).
 *
 * The gate wraps the emulator's own http server (its `request` listeners), so ports, restarts and
 * fault injection (suspend, crash) behave as without it.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { type Clock, systemClock } from '../../shared/time/clock.js';
import { type Decision, evaluate } from './evaluate.js';
import { ADMIN_ACCESS_KEY_ID, accessKeyFor, type LocalPolicySet, type PrincipalPolicy } from './policy.js';
import {
  accessKeyOf,
  type Check,
  type GatedRequest,
  type GatedService,
  mapRequest,
  needsBody,
} from './requests.js';

/** One refused call, as the runtime reports it. */
export interface Refusal {
  readonly atMs: number;
  /** Region of the endpoint called. */
  readonly region: string;
  readonly service: GatedService;
  /** Principal id (`us-east-1/pacer`), or the unknown access key id. */
  readonly principal: string;
  readonly action: string;
  readonly resource: string;
  /** The message the caller received. */
  readonly message: string;
}

/** Options of {@link LocalIam}. */
export interface LocalIamOptions {
  /** Called for every refused call (the runtime prints one line). @default none */
  readonly onRefusal?: (refusal: Refusal) => void;
  /** Clock of `aws:CurrentTime` / `aws:EpochTime` and refusal times. @default systemClock */
  readonly clock?: Clock;
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void;

/** Policies in force, the principals' access keys, and what was refused. */
export class LocalIam {
  private byKey = new Map<string, PrincipalPolicy>();
  private memo = new Map<string, Decision>();
  private current!: LocalPolicySet;
  private readonly clock: Clock;
  /** Refused calls, oldest first (the last 1,000). */
  readonly refusals: Refusal[] = [];
  /** Calls allowed and refused per principal id. */
  readonly counts = new Map<string, { allowed: number; refused: number }>();
  /** Where the policies came from (set by the loader: the cache file, synthesized now or not). */
  origin?: { readonly file: string; readonly cached: boolean };

  constructor(
    set: LocalPolicySet,
    private readonly options: LocalIamOptions = {},
  ) {
    this.clock = options.clock ?? systemClock;
    this.setPolicies(set);
  }

  /** The policy set in force. */
  get policies(): LocalPolicySet {
    return this.current;
  }

  /** Replaces the policies in force (e.g. a set with one grant removed). */
  setPolicies(set: LocalPolicySet): void {
    this.current = set;
    this.byKey = new Map(set.principals.map((p) => [accessKeyFor(p.region, p.name), p]));
    this.memo.clear();
  }

  /** The principal an access key names; `undefined` for the operator key. */
  principalOf(accessKeyId: string): PrincipalPolicy | undefined {
    return this.byKey.get(accessKeyId);
  }

  /** Evaluates one check for a principal calling an endpoint of `region`. */
  decide(principal: PrincipalPolicy, check: Check, region: string): Decision {
    const id = `${principal.id}|${region}|${check.action}|${check.resource}`;
    const hit = this.memo.get(id);
    if (hit) return hit;
    const now = this.clock.now();
    const decision = evaluate(principal, {
      ...check,
      context: {
        'aws:RequestedRegion': region,
        'aws:PrincipalAccount': this.current.account,
        'aws:PrincipalArn': principal.arn.replace(
          /^arn:aws:sts::(\d+):assumed-role\/([^/]+)\/.*$/,
          'arn:aws:iam::$1:role/$2',
        ),
        'aws:SecureTransport': 'true',
        'aws:CurrentTime': new Date(now).toISOString(),
        'aws:EpochTime': String(Math.floor(now / 1000)),
      },
    });
    // Time conditions would make a decision depend on when it is asked: cache only the others.
    if (!JSON.stringify(principal.policies).match(/aws:(CurrentTime|EpochTime)/i))
      this.memo.set(id, decision);
    return decision;
  }

  private count(principal: string, allowed: boolean): void {
    let c = this.counts.get(principal);
    if (!c) {
      c = { allowed: 0, refused: 0 };
      this.counts.set(principal, c);
    }
    if (allowed) c.allowed++;
    else c.refused++;
  }

  private refuse(refusal: Omit<Refusal, 'atMs'>): Refusal {
    const r = { atMs: this.clock.now(), ...refusal };
    this.refusals.push(r);
    if (this.refusals.length > 1000) this.refusals.shift();
    this.options.onRefusal?.(r);
    return r;
  }

  /**
   * Puts the gate in front of an emulator's http server: its `request` listeners run only for
   * authorized requests. Call it before the server listens.
   */
  guard(server: Server, service: GatedService, region: string): void {
    const listeners = server.listeners('request') as Listener[];
    server.removeAllListeners('request');
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const pass = (r: IncomingMessage) => {
        for (const l of listeners) l.call(server, r, res);
      };
      this.handle(service, region, req, res, pass).catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`local IAM gate failed: ${String(error)}`);
      });
    });
  }

  private async handle(
    service: GatedService,
    region: string,
    req: IncomingMessage,
    res: ServerResponse,
    pass: (req: IncomingMessage) => void,
  ): Promise<void> {
    const url = req.url ?? '/';
    const method = req.method ?? 'GET';
    const key = accessKeyOf(req.headers, url);
    // The operator is never checked: its requests go through untouched (no buffering).
    if (key === ADMIN_ACCESS_KEY_ID) {
      pass(req);
      return;
    }
    const principal = key === undefined ? undefined : this.byKey.get(key);
    const reading = needsBody(service, method, url);
    const body = reading ? await readAll(req) : Buffer.alloc(0);
    const forward = () => pass(reading ? replay(req, body) : req);
    if (!principal) {
      this.count(key ?? '(unsigned)', false);
      const message = 'The security token included in the request is invalid.';
      this.refuse({ region, service, principal: key ?? '(unsigned)', action: '?', resource: '?', message });
      send(res, method, unknownKey(service, message));
      return;
    }
    const mapping = mapRequest(service, { method, url, headers: req.headers, body } satisfies GatedRequest, {
      region,
      account: this.current.account,
    });
    if ('error' in mapping) {
      this.count(principal.id, false);
      const message = `User: ${principal.arn} is not authorized to perform this request (local IAM: ${mapping.error})`;
      this.refuse({ region, service, principal: principal.id, action: '?', resource: '?', message });
      send(res, method, accessDenied(service, message));
      return;
    }
    for (const check of mapping.checks) {
      const decision = this.decide(principal, check, region);
      if (decision.allowed) continue;
      this.count(principal.id, false);
      const why =
        decision.reason === 'explicit-deny'
          ? `with an explicit deny in an identity-based policy`
          : `because no identity-based policy allows the ${check.action} action`;
      const local = decision.unevaluable
        ? ` (local IAM could not evaluate: ${decision.unevaluable.join('; ')})`
        : '';
      const message = `User: ${principal.arn} is not authorized to perform: ${check.action} on resource: ${check.resource} ${why}${local}`;
      this.refuse({
        region,
        service,
        principal: principal.id,
        action: check.action,
        resource: check.resource,
        message,
      });
      send(res, method, accessDenied(service, message));
      return;
    }
    this.count(principal.id, true);
    forward();
  }
}

async function readAll(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** The request again, body included, for the emulator's listener (the original is consumed). */
function replay(req: IncomingMessage, body: Buffer): IncomingMessage {
  const copy = new Readable({ read() {} });
  copy.push(body);
  copy.push(null);
  Object.assign(copy, {
    method: req.method,
    url: req.url,
    headers: req.headers,
    rawHeaders: req.rawHeaders,
    httpVersion: req.httpVersion,
    httpVersionMajor: req.httpVersionMajor,
    httpVersionMinor: req.httpVersionMinor,
    socket: req.socket,
    connection: req.socket,
    complete: true,
    aborted: false,
  });
  return copy as unknown as IncomingMessage;
}

const escapeXml = (s: string) => s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** An error answer: status, headers, body. */
interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

function jsonAnswer(
  contentType: string,
  type: string,
  body: object,
  extra: Record<string, string> = {},
): Answer {
  return {
    status: 400,
    headers: {
      'content-type': contentType,
      'x-amzn-requestid': randomUUID(),
      'x-amzn-errortype': type,
      ...extra,
    },
    body: JSON.stringify(body),
  };
}

function xmlAnswer(status: number, xml: string): Answer {
  return {
    status,
    headers: { 'content-type': 'application/xml', 'x-amz-request-id': randomUUID() },
    body: `<?xml version="1.0" encoding="UTF-8"?>\n${xml}`,
  };
}

function queryError(code: string, message: string): string {
  return `<ErrorResponse><Error><Type>Sender</Type><Code>${code}</Code><Message>${escapeXml(message)}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`;
}

function s3Error(code: string, message: string): string {
  return `<Error><Code>${code}</Code><Message>${escapeXml(message)}</Message><RequestId>${randomUUID()}</RequestId></Error>`;
}

/** The service's own AccessDenied answer. */
function accessDenied(service: GatedService, message: string): Answer {
  switch (service) {
    case 'dynamodb':
      return jsonAnswer('application/x-amz-json-1.0', 'AccessDeniedException', {
        __type: 'com.amazon.coral.service#AccessDeniedException',
        Message: message,
      });
    case 'kinesis':
    case 'ssm':
      return jsonAnswer('application/x-amz-json-1.1', 'AccessDeniedException', {
        __type: 'AccessDeniedException',
        message,
      });
    case 'sqs':
      return jsonAnswer(
        'application/x-amz-json-1.0',
        'AccessDenied',
        { __type: 'com.amazon.coral.service#AccessDeniedException', message },
        { 'x-amzn-query-error': 'AccessDenied;Sender' },
      );
    case 'elasticache':
      return xmlAnswer(403, queryError('AccessDenied', message));
    case 's3':
      return xmlAnswer(403, s3Error('AccessDenied', message));
  }
}

/** The service's answer to an access key it does not know. */
function unknownKey(service: GatedService, message: string): Answer {
  switch (service) {
    case 'dynamodb':
      return jsonAnswer('application/x-amz-json-1.0', 'UnrecognizedClientException', {
        __type: 'com.amazon.coral.service#UnrecognizedClientException',
        message,
      });
    case 'kinesis':
    case 'ssm':
      return jsonAnswer('application/x-amz-json-1.1', 'UnrecognizedClientException', {
        __type: 'UnrecognizedClientException',
        message,
      });
    case 'sqs':
      return jsonAnswer(
        'application/x-amz-json-1.0',
        'InvalidClientTokenId',
        { __type: 'com.amazon.coral.service#InvalidClientTokenId', message },
        { 'x-amzn-query-error': 'InvalidClientTokenId;Sender' },
      );
    case 'elasticache':
      return xmlAnswer(403, queryError('InvalidClientTokenId', message));
    case 's3':
      return xmlAnswer(
        403,
        s3Error('InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'),
      );
  }
}

function send(res: ServerResponse, method: string, answer: Answer): void {
  res.writeHead(answer.status, answer.headers);
  res.end(method === 'HEAD' ? undefined : answer.body);
}

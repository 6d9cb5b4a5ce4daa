import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { elastiCacheAuthToken, IAM_TOKEN_TTL_SECONDS } from '../../../shared/redis/iam-auth.js';
import { ManualClock } from '../../../shared/time/clock.js';

const credentials = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  sessionToken: 'session/token+with=specials',
};
const target = { userId: 'paceline-app', cacheName: 'Paceline', region: 'us-west-2' };

/** SigV4 query presigning written out from the AWS specification, independent of the signer. */
function expectedToken(now: Date, withSession: boolean): string {
  const enc = (v: string) =>
    encodeURIComponent(v).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const scope = `${day}/us-west-2/elasticache/aws4_request`;
  const query: Record<string, string> = {
    Action: 'connect',
    User: 'paceline-app',
    'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
    'X-Amz-Credential': `${credentials.accessKeyId}/${scope}`,
    'X-Amz-Date': amzDate,
    'X-Amz-Expires': String(IAM_TOKEN_TTL_SECONDS),
    ...(withSession ? { 'X-Amz-Security-Token': credentials.sessionToken } : {}),
    'X-Amz-SignedHeaders': 'host',
  };
  const canonicalQuery = Object.keys(query)
    .sort()
    .map((k) => `${enc(k)}=${enc(query[k] as string)}`)
    .join('&');
  const canonicalRequest = [
    'GET',
    '/',
    canonicalQuery,
    'host:paceline\n',
    'host',
    createHash('sha256').update('').digest('hex'),
  ].join('\n');
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonicalRequest).digest('hex'),
  ].join('\n');
  const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
  const signingKey = hmac(
    hmac(hmac(hmac(`AWS4${credentials.secretAccessKey}`, day), 'us-west-2'), 'elasticache'),
    'aws4_request',
  );
  const signature = createHmac('sha256', signingKey).update(stringToSign).digest('hex');
  return `paceline/?${canonicalQuery}&X-Amz-Signature=${signature}`;
}

describe('ElastiCache IAM auth token', () => {
  it('is the SigV4-presigned connect request for the (lower-cased) cache, at the injected time', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 18, 45, 7));
    const token = await elastiCacheAuthToken(target, credentials, clock);
    // Same bytes as an implementation written from the specification, query sorted.
    const sorted = (t: string) => {
      const [host, query] = t.split('/?') as [string, string];
      return `${host}/?${query.split('&').sort().join('&')}`;
    };
    expect(sorted(token)).toBe(sorted(expectedToken(new Date(clock.now()), true)));
    expect(token.startsWith('paceline/?')).toBe(true);
    expect(token).toContain('X-Amz-Expires=900');
    expect(token).toContain('X-Amz-Security-Token=session%2Ftoken%2Bwith%3Dspecials');
  });

  it('leaves out the session token for long-term credentials', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const { sessionToken: _omit, ...longTerm } = credentials;
    const token = await elastiCacheAuthToken(target, longTerm, clock);
    expect(token).not.toContain('X-Amz-Security-Token');
    const signature = (t: string) => /X-Amz-Signature=([0-9a-f]{64})/.exec(t)?.[1];
    expect(signature(token)).toBe(signature(expectedToken(new Date(clock.now()), false)));
  });

  it('changes with time, credentials and user, and is stable for the same inputs', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 23, 12));
    const a = await elastiCacheAuthToken(target, credentials, clock);
    expect(await elastiCacheAuthToken(target, credentials, clock)).toBe(a);
    clock.advance(1000);
    expect(await elastiCacheAuthToken(target, credentials, clock)).not.toBe(a);
    clock.set(Date.UTC(2026, 10, 23, 12));
    expect(await elastiCacheAuthToken({ ...target, userId: 'other' }, credentials, clock)).not.toBe(a);
    expect(await elastiCacheAuthToken(target, { ...credentials, secretAccessKey: 'x' }, clock)).not.toBe(a);
  });
});

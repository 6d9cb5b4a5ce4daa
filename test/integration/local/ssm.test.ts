/** The local SSM Parameter Store endpoint, driven by the real @aws-sdk/client-ssm. */
import {
  GetParameterCommand,
  GetParametersByPathCommand,
  GetParametersCommand,
  type Parameter,
  PutParameterCommand,
  type SSMClient,
} from '@aws-sdk/client-ssm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningSsm, startSsmServer } from '../../../local/emulators/ssm-server.js';
import { ssmClient } from '../../../shared/aws/clients.js';

let server: RunningSsm;
let ssm: SSMClient;
beforeAll(async () => {
  server = await startSsmServer({ region: 'us-west-2' });
  ssm = ssmClient({ region: 'us-west-2', ssm: server.url });
});
afterAll(async () => {
  ssm.destroy();
  await server.stop();
});

const put = (Name: string, Value: string, Overwrite?: boolean) =>
  ssm.send(
    new PutParameterCommand({
      Name,
      Value,
      Type: 'String',
      ...(Overwrite === undefined ? {} : { Overwrite }),
    }),
  );

async function allByPath(Path: string, Recursive: boolean, MaxResults?: number) {
  const pages: Parameter[][] = [];
  let NextToken: string | undefined;
  do {
    const res = await ssm.send(new GetParametersByPathCommand({ Path, Recursive, MaxResults, NextToken }));
    pages.push(res.Parameters ?? []);
    NextToken = res.NextToken;
  } while (NextToken);
  return pages;
}

describe('local SSM endpoint', () => {
  it('versions increase on Overwrite; the value and metadata come back', async () => {
    expect((await put('/t/versions/a', 'one')).Version).toBe(1);
    expect((await put('/t/versions/a', 'two', true)).Version).toBe(2);
    expect((await put('/t/versions/a', 'three', true)).Version).toBe(3);
    const { Parameter: p } = await ssm.send(new GetParameterCommand({ Name: '/t/versions/a' }));
    expect(p).toMatchObject({ Name: '/t/versions/a', Value: 'three', Version: 3, Type: 'String' });
    expect(p?.ARN).toBe('arn:aws:ssm:us-west-2:000000000000:parameter/t/versions/a');
    expect(p?.LastModifiedDate).toBeInstanceOf(Date);
    expect(Math.abs((p?.LastModifiedDate?.getTime() ?? 0) - Date.now())).toBeLessThan(60_000);
  });

  it('PutParameter without Overwrite on an existing name is ParameterAlreadyExists and keeps the value', async () => {
    await put('/t/exists/a', 'first');
    const error = await put('/t/exists/a', 'second').catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'ParameterAlreadyExists' });
    const { Parameter: p } = await ssm.send(new GetParameterCommand({ Name: '/t/exists/a' }));
    expect(p).toMatchObject({ Value: 'first', Version: 1 });
  });

  it('missing names give ParameterNotFound', async () => {
    const error = await ssm
      .send(new GetParameterCommand({ Name: '/t/missing/nope' }))
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'ParameterNotFound' });
    expect((error as Error).message).toContain('/t/missing/nope');
  });

  it('GetParameters returns the found ones and lists the rest as InvalidParameters', async () => {
    await put('/t/many/x', 'X');
    await put('/t/many/y', 'Y');
    const res = await ssm.send(
      new GetParametersCommand({ Names: ['/t/many/x', '/t/many/ghost', '/t/many/y'] }),
    );
    expect(res.Parameters?.map((p) => [p.Name, p.Value])).toEqual([
      ['/t/many/x', 'X'],
      ['/t/many/y', 'Y'],
    ]);
    expect(res.InvalidParameters).toEqual(['/t/many/ghost']);
  });

  it('GetParametersByPath pages with NextToken; Recursive includes deeper levels, non-recursive does not', async () => {
    const top = Array.from({ length: 7 }, (_, i) => `/t/path/p${i}`);
    const deep = Array.from({ length: 5 }, (_, i) => `/t/path/sub/q${i}`);
    for (const name of [...top, ...deep]) await put(name, `v-${name}`);
    await put('/t/pathology/other', 'not under /t/path/');

    const flatPages = await allByPath('/t/path', false, 3);
    expect(flatPages.map((p) => p.length)).toEqual([3, 3, 1]);
    expect(flatPages.flat().map((p) => p.Name)).toEqual(top);

    const recursivePages = await allByPath('/t/path/', true, 5);
    expect(recursivePages.map((p) => p.length)).toEqual([5, 5, 2]);
    const names = recursivePages.flat().map((p) => p.Name);
    expect(new Set(names)).toEqual(new Set([...top, ...deep]));
    expect(names).toHaveLength(12); // no duplicates across pages
    expect(names).not.toContain('/t/pathology/other');
  });
});

/**
 * Readable local logs. Every function instance writes its whole output (Powertools' JSON log
 * lines, EMF metrics, stack traces) to its own file, `<dir>/<function>-<pid>.log`, the way
 * CloudWatch keeps one log stream per execution environment; the console gets one compact line
 * per invocation (function, instance, records, duration, outcome), or with `--logs full` every
 * instance's output as well, each line prefixed with its instance.
 */
import { createWriteStream, mkdirSync, rmSync, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

/** What the console shows. */
export type ConsoleLogMode = 'compact' | 'full';

/** One finished invocation, as the compact console line reports it. */
export interface InvocationRecord {
  readonly functionName: string;
  readonly pid: number | undefined;
  /** Records in the event (a Kinesis batch), or undefined for a scheduled/other event. */
  readonly records: number | undefined;
  readonly durationMs: number;
  readonly ok: boolean;
  /** Entries of a partial batch response (`batchItemFailures`). */
  readonly failedItems: number;
  readonly errorType?: string;
  readonly errorMessage?: string;
}

/** Number of records of a Kinesis/SQS-style event, undefined for other events. */
export function recordsOf(event: unknown): number | undefined {
  const records = (event as { Records?: unknown } | null)?.Records;
  return Array.isArray(records) ? records.length : undefined;
}

/** Length of a partial batch response's `batchItemFailures`, 0 for anything else. */
export function failedItemsOf(payload: unknown): number {
  const failures = (payload as { batchItemFailures?: unknown } | null)?.batchItemFailures;
  return Array.isArray(failures) ? failures.length : 0;
}

/** The compact console line of one invocation. */
export function formatInvocation(region: string, r: InvocationRecord, logFile?: string): string {
  const what = r.records === undefined ? 'scheduled' : `${r.records} record${r.records === 1 ? '' : 's'}`;
  const took =
    r.durationMs < 1000 ? `${Math.round(r.durationMs)} ms` : `${(r.durationMs / 1000).toFixed(1)} s`;
  const outcome = !r.ok
    ? `ERROR ${r.errorType}: ${firstLine(r.errorMessage ?? '')}`
    : r.failedItems > 0
      ? `${r.failedItems} failed item${r.failedItems === 1 ? '' : 's'} (retried)`
      : 'ok';
  const where = !r.ok || r.failedItems > 0 ? (logFile ? `  → ${logFile}` : '') : '';
  return `[${region}] ${r.functionName} #${r.pid ?? '?'}  ${what}  ${took}  ${outcome}${where}`;
}

function firstLine(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/** Options of {@link InstanceLogs}. */
export interface InstanceLogsOptions {
  /** Folder of this region's instance logs (emptied at start: one run's logs at a time). */
  readonly dir: string;
  /** Also echo every instance's output to the console, prefixed. @default false */
  readonly echo?: boolean;
  /** Prefix of echoed lines, e.g. the region. @default '' */
  readonly prefix?: string;
}

/** The log files of one region's function instances. */
export class InstanceLogs {
  private readonly streams = new Set<WriteStream>();

  constructor(private readonly options: InstanceLogsOptions) {
    rmSync(options.dir, { recursive: true, force: true });
    mkdirSync(options.dir, { recursive: true });
  }

  /** Path of an instance's log file. */
  file(functionName: string, pid: number): string {
    return join(this.options.dir, `${functionName}-${pid}.log`);
  }

  /** Copies an instance's stdout and stderr into its file (and to the console when echoing). */
  attach(functionName: string, pid: number, stdout: Readable | null, stderr: Readable | null): void {
    const out = createWriteStream(this.file(functionName, pid), { flags: 'a' });
    out.on('error', () => {});
    this.streams.add(out);
    let open = 2;
    const done = () => {
      if (--open === 0) {
        out.end();
        this.streams.delete(out);
      }
    };
    for (const [stream, console] of [
      [stdout, process.stdout],
      [stderr, process.stderr],
    ] as const) {
      if (!stream) {
        done();
        continue;
      }
      stream.on('data', (chunk: Buffer) => {
        out.write(chunk);
        if (this.options.echo)
          console.write(
            prefixLines(chunk.toString(), `${this.options.prefix ?? ''}${functionName} #${pid} | `),
          );
      });
      stream.once('end', done);
    }
  }

  /** Flushes and closes every open file. */
  async close(): Promise<void> {
    await Promise.all([...this.streams].map((s) => new Promise<void>((resolve) => s.end(() => resolve()))));
    this.streams.clear();
  }
}

function prefixLines(text: string, prefix: string): string {
  return text
    .split('\n')
    .map((line, i, all) => (i === all.length - 1 && line === '' ? '' : `${prefix}${line}\n`))
    .join('');
}

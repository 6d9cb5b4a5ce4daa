/**
 * On-failure destination of a local event-source mapping. In AWS it is an SQS queue or SNS
 * topic receiving {@link KinesisOnFailureRecord}s; locally the records are appended as JSON lines
 * to a file (`.local/<region>/on-failure/<function>.jsonl`) and kept in memory for tests.
 */
import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { KinesisOnFailureRecord } from './lambda-shapes.js';

/** Receives the metadata of batches Lambda gave up on. */
export interface OnFailureDestination {
  /** Where the records go, for banners and logs. */
  readonly location: string;
  send(record: KinesisOnFailureRecord): Promise<void>;
}

/** Options of {@link LocalOnFailureDestination}. */
export interface LocalOnFailureDestinationOptions {
  /** JSON-lines file to append to; omit to keep records in memory only. */
  readonly file?: string;
}

/** Keeps records in memory and, when a file is given, appends each as one JSON line. */
export class LocalOnFailureDestination implements OnFailureDestination {
  readonly records: KinesisOnFailureRecord[] = [];
  readonly location: string;
  private dirReady?: Promise<unknown>;

  constructor(private readonly options: LocalOnFailureDestinationOptions = {}) {
    this.location = options.file ?? 'memory';
  }

  async send(record: KinesisOnFailureRecord): Promise<void> {
    const file = this.options.file;
    if (file) {
      this.dirReady ??= mkdir(dirname(file), { recursive: true });
      await this.dirReady;
      await appendFile(file, `${JSON.stringify(record)}\n`);
    }
    this.records.push(record);
  }
}

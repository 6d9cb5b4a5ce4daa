/**
 * Per-shard checkpoints of an event-source mapping: the sequence number of the last record that
 * is done (processed, or handed to the on-failure destination). A restarted poller resumes
 * after it, as Lambda resumes a mapping after a redeploy.
 */

import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { PacelineError } from '../../shared/errors.js';

/** Where a mapping keeps its per-shard position. */
export interface CheckpointStore {
  /** Last completed sequence number of `shardId`, or undefined when the shard was never checkpointed. */
  get(shardId: string): Promise<string | undefined>;
  /** Records that every record of `shardId` up to and including `sequenceNumber` is done. */
  set(shardId: string, sequenceNumber: string): Promise<void>;
}

/** Checkpoints in memory (the default; share one instance between pollers to resume). */
export class MemoryCheckpointStore implements CheckpointStore {
  private readonly positions = new Map<string, string>();

  async get(shardId: string): Promise<string | undefined> {
    return this.positions.get(shardId);
  }

  async set(shardId: string, sequenceNumber: string): Promise<void> {
    const previous = this.positions.get(shardId);
    // Checkpoints only move forward; sequence numbers are decimal strings of growing length.
    if (previous !== undefined && compareSequenceNumbers(sequenceNumber, previous) < 0) {
      throw new CheckpointRegressionError(shardId, previous, sequenceNumber);
    }
    this.positions.set(shardId, sequenceNumber);
  }

  /** Snapshot of every shard's checkpoint. */
  snapshot(): Record<string, string> {
    return Object.fromEntries(this.positions);
  }
}

/** A checkpoint was asked to move backwards: a poller bug, never a normal condition. */
export class CheckpointRegressionError extends PacelineError {
  override readonly name = 'CheckpointRegressionError';
  override readonly code = 'local.checkpoint-regression';
  constructor(shardId: string, previous: string, next: string) {
    super(`Checkpoint of ${shardId} would move backwards from ${previous} to ${next}.`);
  }
}

/** Orders Kinesis sequence numbers (decimal strings of up to 128 bits). */
export function compareSequenceNumbers(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Checkpoints kept in a JSON file (rewritten through a rename after every move), so a runner
 * restarted on a persistent Kinesis store resumes where it stopped instead of replaying the
 * stream or skipping to its end.
 */
export class FileCheckpointStore implements CheckpointStore {
  private readonly memory = new MemoryCheckpointStore();

  constructor(private readonly file: string) {
    if (existsSync(file)) {
      const saved = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
      for (const [shard, sequence] of Object.entries(saved)) void this.memory.set(shard, sequence);
    }
  }

  get(shardId: string): Promise<string | undefined> {
    return this.memory.get(shardId);
  }

  async set(shardId: string, sequenceNumber: string): Promise<void> {
    await this.memory.set(shardId, sequenceNumber);
    mkdirSync(dirname(this.file), { recursive: true });
    writeFileSync(`${this.file}.tmp`, JSON.stringify(this.memory.snapshot()));
    renameSync(`${this.file}.tmp`, this.file);
  }
}

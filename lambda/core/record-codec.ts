import type { InteractionRecord } from "./record";

/**
 * The port of the warehouse's file format: interaction records to a file's bytes and back. The
 * consumer encodes each file it writes; the deletion steps decode a file and encode what they keep. The
 * one adapter is Parquet (`adapters/parquet/codec.ts`); the compositions pass it in.
 */
export interface RecordCodec {
  encode(records: readonly InteractionRecord[]): Uint8Array;
  decode(bytes: Uint8Array): Promise<InteractionRecord[]>;
}

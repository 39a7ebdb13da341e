/** The shapes of the hold items and of what their steps take and give (hold-items.ts has the steps). */

/** What a hold took: its amount (micros), when, and until when. */
export interface HoldMarker {
  m: number;
  t: number;
  x: number;
}

export interface HoldItem extends HoldMarker {
  owner: string;
  holdId: string;
  c?: number;
  u?: number;
  k?: number;
  st?: number;
  tombstone?: boolean;
}

/** An update of the owner's own attributes, merged into t1 or r3. */
export interface OwnerWrite {
  set: string;
  condition?: string;
  values: Record<string, unknown>;
  names?: Record<string, string>;
}

export type TakeResult =
  | { taken: true; owner: Record<string, unknown> }
  | { taken: false; owner: Record<string, unknown> | undefined };

export type ResolveResult<T> =
  | { done: "now"; value: T }
  /** Resolved before (its item is gone), or being resolved by another process right now. */
  | { done: "before" | "elsewhere" };

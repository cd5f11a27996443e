/**
 * What a finished generation reports to an API client, the same for /v1/chat/completions and
 * /v1/completions: OpenAI's `usage` (with `completion_tokens_details` when speculative decode
 * drafted ids, in OpenAI's predicted-output terms) and k3's own `k3` statistics object.
 */
import type { TurnResult } from "../session/conversation.ts";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Speculative decode only: drafted ids the model accepted, and those it did not. */
  completion_tokens_details?: { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

export interface CompletionStats {
  /** The seed the reply was sampled with: the request's, or the fresh one drawn for it (send it back to get this answer again). */
  seed: number;
  /** Prompt ids served from the carried state or a snapshot. */
  reused_prompt_ids: number;
  /** Prompt ids this request fed. */
  prefilled_ids: number;
  /** "live": the state the previous request left; "snapshot": one held in RAM; "parked": one read back from its file. */
  reused_from: TurnResult["reusedFrom"];
  prefill_seconds: number;
  decode_seconds: number;
  /** The snapshots held after this request. */
  snapshots?: { in_ram: number; parked: number; ram_bytes: number; parked_bytes: number; parked_writes: number; dropped: number };
  /** Speculative decode (`k3 serve --spec N` or `--draft-trunk`): ids drafted per sweep at most, sweeps, ids drafted and accepted. */
  speculation?: { max_draft: number; sweeps: number; drafted: number; accepted: number };
}

/** `usage`, counting the prompt as chat.md 4.6 does (`promptTokens`) and the reply as the ids generated. */
export function usageOf(promptTokens: number, turn: TurnResult): Usage {
  const completion = turn.generated.length;
  const s = turn.speculation;
  return {
    prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion,
    ...(s && { completion_tokens_details: { accepted_prediction_tokens: s.accepted, rejected_prediction_tokens: s.drafted - s.accepted } }),
  };
}

export function statsOf(turn: TurnResult, seed: number): CompletionStats {
  const s = turn.speculation;
  return {
    seed,
    reused_prompt_ids: turn.reusedPromptIds, prefilled_ids: turn.fedPromptIds, reused_from: turn.reusedFrom,
    prefill_seconds: turn.prefillSeconds, decode_seconds: turn.decodeSeconds,
    ...(turn.snapshots && {
      snapshots: {
        in_ram: turn.snapshots.inRam, parked: turn.snapshots.parked, ram_bytes: turn.snapshots.ramBytes,
        parked_bytes: turn.snapshots.parkedBytes, parked_writes: turn.snapshots.parkedWrites, dropped: turn.snapshots.dropped,
      },
    }),
    ...(s && { speculation: { max_draft: s.maxDraft, sweeps: s.sweeps, drafted: s.drafted, accepted: s.accepted } }),
  };
}

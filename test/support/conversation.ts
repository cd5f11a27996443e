/** Conversation options for tests: snapshots in RAM (or parked in a test directory), warnings collected. */
import type { Engine } from "../../src/engine/open.ts";
import type { ConversationOptions } from "../../src/session/conversation.ts";
import { tempDir } from "./tmp.ts";

export interface TestConversation extends ConversationOptions {
  warnings: string[];
}

export function conversationOptions(engine: Engine, snapshots: { ramBytes?: number; diskBytes?: number } = {}): TestConversation {
  const warnings: string[] = [];
  return {
    chunk: engine.plan.prefillChunk,
    snapshots: { ramBytes: snapshots.ramBytes ?? 1e9, diskBytes: snapshots.diskBytes ?? 1e9, parent: tempDir("snapshots") },
    warn: (message) => warnings.push(message),
    warnings,
  };
}

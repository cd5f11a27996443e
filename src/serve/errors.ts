/**
 * Errors as OpenAI clients expect them: an HTTP status and `{"error":{"message","type","param",
 * "code"}}`. A usage error about one field carries it (`K3Error.field`), which becomes `param`.
 */
import { K3Error, ExitCode } from "../errors.ts";

export interface ApiError {
  status: number;
  type: string;
  message: string;
  param: string | null;
  code: string | null;
}

export const apiError = (status: number, type: string, message: string, code: string | null = null, param: string | null = null): ApiError =>
  ({ status, type, message, param, code });

/** A thrown error as the response it deserves: a K3 usage error is the client's (400). */
export function fromThrown(error: unknown): ApiError {
  if (error instanceof K3Error && error.exitCode === ExitCode.usage) {
    return apiError(400, "invalid_request_error", error.message, error.kind ?? "invalid_request", error.field ?? null);
  }
  const message = error instanceof Error ? error.message : String(error);
  return apiError(500, "server_error", message, "internal_error");
}

export function errorResponse(e: ApiError, headers: Record<string, string> = {}): Response {
  return Response.json({ error: { message: e.message, type: e.type, param: e.param, code: e.code } }, { status: e.status, headers });
}

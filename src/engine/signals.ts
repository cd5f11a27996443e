/**
 * What commands call so that Ctrl-C and SIGTERM stop their work cleanly (exit 130 / 143, one
 * line, nothing written): `watchSignals` once at the start, `stopIfSignalled` before anything
 * becomes visible. The polls inside the work live where the work is (each layer of the forward
 * pass, each layer loaded, each chunk packed).
 */
export { stopIfSignalled, watchSignals } from "../native/signals.ts";

/**
 * Headless Chromium from the distribution's packages (Debian's `chromium`), driven by
 * playwright-core over CDP. Playwright's own browser downloads are never used: the package is
 * the browser, and a machine without it makes the browser tests skip and say why.
 */
import { existsSync } from "node:fs";
import { chromium, type BrowserContext } from "playwright-core";
import { tempDir } from "./tmp.ts";

export const chromiumPath = "/usr/bin/chromium";

/** Why the browser tests cannot run here, or undefined when they can. */
export const browserMissing: string | undefined = existsSync(chromiumPath)
  ? undefined
  : `${chromiumPath} is not installed (apt-get install -y chromium; .ci/run installs it when it can)`;

/** A fresh browser with a profile of its own in the test's temporary directory. */
export function openBrowser(viewport = { width: 1280, height: 800 }): Promise<BrowserContext> {
  return chromium.launchPersistentContext(tempDir("chromium-profile"), {
    executablePath: chromiumPath,
    headless: true,
    viewport,
    acceptDownloads: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
}

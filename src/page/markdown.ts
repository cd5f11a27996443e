/**
 * Model output to DOM, safely. Two layers, so that neither alone has to be perfect:
 * marked renders Markdown with every raw HTML block or tag in the text turned into visible,
 * escaped text (a model that writes `<script>` shows `<script>`), and DOMPurify then removes
 * whatever active content the Markdown itself could still produce (javascript: links, event
 * attributes). Images become links, so model output never makes the browser fetch anything.
 * The result is a DOM fragment, never an HTML string assigned to innerHTML.
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";

const escapes: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => escapes[c] as string);

const marked = new Marked({
  gfm: true,
  breaks: true,
  async: false,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const config = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ["style", "img", "picture", "video", "audio", "source", "iframe", "form", "input", "button", "textarea", "select"],
  FORBID_ATTR: ["style", "class", "id"],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true as const,
};

/** The Markdown `text` as a sanitised fragment. */
export function renderMarkdown(text: string): DocumentFragment {
  return purify.sanitize(marked.parse(text) as string, config);
}

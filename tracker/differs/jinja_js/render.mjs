// Child side of hubwatch's template matrix for @huggingface/jinja (transformers.js, chat-ui).
//
// Same protocol as render_worker.py: JSON requests on stdin, one a line ({"templates": [str], "jobs":
// [{"template": int, "context": {...} | null}], "now": ISO datetime, "output_chars": int}), served in turn
// until stdin closes; per request on stdout {"ready": true, "version"}, one line per job, in order:
// {"job": i, "prompt": str} or {"job": i, "error": str}, then {"done": true}. A job whose context is null
// only parses its template. The parent bounds time (it kills this process past its
// deadline) and memory (--max-old-space-size); `strftime_now` sees the request's fixed clock (TZ=UTC).
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));
const version = JSON.parse(readFileSync(join(here, "node_modules/@huggingface/jinja/package.json"), "utf8")).version;

function emit(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

function describe(err) {
  const text = String(err && err.message !== undefined ? err.message : err);
  if (err instanceof RangeError) return `exceeded the recursion limit (${text})`.slice(0, 500);
  return `${err && err.name ? err.name : "Error"}: ${text}`.slice(0, 500);
}

let fixedNow = Date.now();
const RealDate = Date;
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(fixedNow);
    else super(...args);
  }
  static now() {
    return fixedNow;
  }
};

function serve(request) {
  fixedNow = Date.parse(request.now);
  emit({ ready: true, version });
  const compiled = new Map();
  request.jobs.forEach((job, index) => {
    try {
      if (!compiled.has(job.template)) {
        try {
          compiled.set(job.template, new Template(request.templates[job.template]));
        } catch (err) {
          compiled.set(job.template, { failed: `template syntax error: ${describe(err)}` });
        }
      }
      const template = compiled.get(job.template);
      if (template.failed !== undefined) throw new Error(template.failed);
      if (job.context === null) {
        emit({ job: index, prompt: "" });
        return;
      }
      const prompt = template.render(job.context);
      if (prompt.length > request.output_chars) throw new Error(`output exceeded the limit of ${request.output_chars} characters`);
      emit({ job: index, prompt });
    } catch (err) {
      emit({ job: index, error: err instanceof Error && /^(template syntax error|output exceeded)/.test(err.message) ? err.message : describe(err) });
    }
  });
  emit({ done: true });
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (line.trim() !== "") serve(JSON.parse(line));
});

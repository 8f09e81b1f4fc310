// The expected renderings of tests/data/chat_templates (chat_template_expected.json):
// every template listed under "engine" in conversations.json, on every
// conversation there, with add_generation_prompt true and false, rendered by
// @huggingface/jinja (the Jinja engine of transformers.js) as transformers'
// apply_chat_template calls a template: messages, tools (when the
// conversation has some), bos_token / eos_token of the model,
// add_generation_prompt. A template that raises gives {"error": message}.
// Usage: node chat_template_expected.mjs DATA_DIR OUT.json
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [dir, outPath] = process.argv.slice(2);
const data = JSON.parse(readFileSync(`${dir}/conversations.json`, "utf8"));
const out = {};
for (const [file, tokens] of Object.entries(data.engine)) {
  const template = new Template(readFileSync(`${dir}/${file}`, "utf8"));
  for (const [name, conv] of Object.entries(data.conversations)) {
    for (const gen of [true, false]) {
      const context = {
        messages: Array.isArray(conv) ? conv : conv.messages,
        bos_token: tokens.bos_token,
        eos_token: tokens.eos_token,
        add_generation_prompt: gen,
      };
      if (!Array.isArray(conv) && conv.tools) context.tools = conv.tools;
      const key = `${file}|${name}|${gen ? "gen" : "nogen"}`;
      try {
        out[key] = { text: template.render(context) };
      } catch (e) {
        out[key] = { error: String(e.message) };
      }
    }
  }
}
writeFileSync(outPath, JSON.stringify(out, null, 1) + "\n");

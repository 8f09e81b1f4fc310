// Renders a conversation with @huggingface/jinja (the Jinja engine of
// transformers.js), as transformers' apply_chat_template calls a template:
// bos_token "<s>" / eos_token "</s>", add_generation_prompt true
// (raise_exception is built into the package). Prints the text; a leading
// bos_token is dropped (hqekv leaves BOS to the tokenizer).
// Usage: node chat_template_ref.mjs TEMPLATE.jinja MESSAGES.json
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [templatePath, messagesPath] = process.argv.slice(2);
const template = new Template(readFileSync(templatePath, "utf8"));
let text = template.render({
  messages: JSON.parse(readFileSync(messagesPath, "utf8")),
  bos_token: "<s>",
  eos_token: "</s>",
  add_generation_prompt: true,
});
if (text.startsWith("<s>")) text = text.slice(3);
process.stdout.write(text);

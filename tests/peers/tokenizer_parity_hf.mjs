// Token ids of each text of a JSON array under a Hugging Face tokenizer
// (@lenml/tokenizer-FAMILY: the family's real tokenizer.json, run by
// @lenml/tokenizers, a tokenizer-only fork of transformers.js), without
// added BOS/EOS; added tokens written in the text become their ids.
// Usage: node tokenizer_parity_hf.mjs FAMILY TEXTS.json OUT.json
import { readFileSync, writeFileSync } from "node:fs";

const [family, textsPath, outPath] = process.argv.slice(2);
const { fromPreTrained } = await import(`@lenml/tokenizer-${family}`);
const tok = fromPreTrained();
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
writeFileSync(outPath, JSON.stringify(texts.map((t) => tok.encode(t, { add_special_tokens: false }))));

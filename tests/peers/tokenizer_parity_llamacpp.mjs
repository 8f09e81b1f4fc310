// Token ids of each text of a JSON array under llama.cpp's tokenizer
// (node-llama-cpp's prebuilt llama.cpp, the GGUF loaded vocabulary-only), as
// llama_tokenize gives them with add_special off: no BOS/EOS added;
// parse_special on (OUT_SPECIAL: control tokens written in the text become
// their ids) and off (OUT_PLAIN: only user-defined tokens do).
// Usage: node tokenizer_parity_llamacpp.mjs NODE_DIR MODEL.gguf TEXTS.json OUT_SPECIAL.json OUT_PLAIN.json
import {readFileSync, writeFileSync} from "node:fs";
import path from "node:path";
import {pathToFileURL} from "node:url";

const [nodeDir, modelPath, textsPath, outSpecial, outPlain] = process.argv.slice(2);
const {getLlama, LlamaLogLevel} = await import(
  pathToFileURL(path.join(nodeDir, "node_modules/node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, vocabOnly: true});
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
writeFileSync(outSpecial, JSON.stringify(texts.map((t) => model.tokenize(t, true))));
writeFileSync(outPlain, JSON.stringify(texts.map((t) => model.tokenize(t, false))));
console.error(`llama.cpp ${llama.llamaCppRelease.release}: ${texts.length} texts tokenized`);
await model.dispose();
await llama.dispose();

// The official OpenAI Node client against `hqekv serve` (BASE, key node-key):
// completions, chat, streaming, n, seed, stop, unsupported parameters, errors.
const assert = require('assert');
const OpenAI = require('openai');

async function main() {
  const client = new OpenAI({baseURL: process.env.BASE + '/v1', apiKey: 'node-key', maxRetries: 0});

  const models = await client.models.list();
  assert.ok(models.data.length === 1 && models.data[0].id, 'models.list');

  const c = await client.completions.create(
      {model: 'x', prompt: 'Once upon a time', max_tokens: 12, temperature: 0});
  assert.strictEqual(c.object, 'text_completion');
  assert.ok(c.choices[0].text.length > 0, 'completion text');
  assert.strictEqual(c.usage.completion_tokens, 12);
  assert.ok(c.usage.kv_bytes > 0 && c.usage.kv_true_bits > 0, 'usage kv fields');

  // Streaming gives the same greedy text as the plain call.
  const stream = await client.completions.create(
      {model: 'x', prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stream: true});
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0].text;
  assert.strictEqual(text, c.choices[0].text, 'streamed completion == plain completion');

  const chat = await client.chat.completions.create({
    model: 'x',
    messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content: 'Hi'}],
    max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2,
  });
  assert.strictEqual(chat.choices[0].message.role, 'assistant');
  assert.ok(chat.choices[0].logprobs.content.length > 0, 'chat logprobs');
  assert.strictEqual(chat.choices[0].logprobs.content[0].top_logprobs.length, 2);

  const chatStream = await client.chat.completions.create({
    model: 'x', messages: [{role: 'user', content: 'Hi'}], max_tokens: 8, temperature: 0,
    stream: true,
  });
  let chatText = '', finish = null;
  for await (const chunk of chatStream) {
    chatText += chunk.choices[0].delta.content || '';
    finish = chunk.choices[0].finish_reason || finish;
  }
  assert.ok(finish === 'length' || finish === 'stop', 'stream finish_reason ' + finish);

  // n: one choice per sequence, indexed; usage sums the completions.
  const many = await client.completions.create(
      {model: 'x', prompt: 'Once upon a time', max_tokens: 6, temperature: 1, seed: 3, n: 3});
  assert.deepStrictEqual(many.choices.map((ch) => ch.index).sort(), [0, 1, 2], 'n=3 indexes');
  assert.strictEqual(many.usage.completion_tokens, 18, 'n=3 usage');
  assert.ok(new Set(many.choices.map((ch) => ch.text)).size >= 2, 'n=3 choices differ');

  // seed: the same seed gives the same sampled text, another seed another.
  const sampled = async (seed) => (await client.completions.create({
    model: 'x', prompt: 'Once upon a time', max_tokens: 16, temperature: 1, seed,
  })).choices[0].text;
  const s1 = await sampled(7), s2 = await sampled(7), s3 = await sampled(8);
  assert.strictEqual(s1, s2, 'same seed, same text');
  assert.notStrictEqual(s1, s3, 'another seed, another text');

  // stop: the text ends before the first stop string.
  const free = await client.completions.create(
      {model: 'x', prompt: 'Once upon a time', max_tokens: 60, temperature: 0});
  assert.ok(free.choices[0].text.includes('.'), 'the greedy text has a period to stop at');
  const stopped = await client.completions.create({
    model: 'x', prompt: 'Once upon a time', max_tokens: 60, temperature: 0, stop: ['.', 'zzz'],
  });
  assert.strictEqual(stopped.choices[0].finish_reason, 'stop', 'stop finish_reason');
  assert.strictEqual(stopped.choices[0].text, free.choices[0].text.split('.')[0],
                     'the text ends before the stop string');

  // Streaming n=2: chunks of both choices, each ending with its finish_reason.
  const nStream = await client.chat.completions.create({
    model: 'x', messages: [{role: 'user', content: 'Hi'}], max_tokens: 5, temperature: 1,
    seed: 1, n: 2, stream: true,
  });
  const finished = new Set();
  let usage = null;
  for await (const chunk of nStream) {
    for (const ch of chunk.choices) if (ch.finish_reason) finished.add(ch.index);
    usage = chunk.usage || usage;
  }
  assert.deepStrictEqual([...finished].sort(), [0, 1], 'streamed n=2 finishes both');
  assert.ok(usage && usage.completion_tokens >= 2, 'streamed usage');

  // An unsupported parameter: 400 naming it, never silently ignored.
  await assert.rejects(
      client.chat.completions.create({
        model: 'x', messages: [{role: 'user', content: 'Hi'}],
        response_format: {type: 'json_object'},
      }),
      (e) => e.status === 400 && e.param === 'response_format' && /not supported/.test(e.message));
  await assert.rejects(
      client.chat.completions.create({
        model: 'x', messages: [{role: 'user', content: 'Hi'}],
        tools: [{type: 'function', function: {name: 'f', parameters: {}}}],
      }),
      (e) => e.status === 400 && e.param === 'tools');

  // An invalid policy: the client raises BadRequestError with the server's message.
  await assert.rejects(
      client.completions.create({model: 'x', prompt: 'x', kv: 'hqekv:bits=banana'}),
      (e) => e.status === 400 && /kv/.test(e.message));
  // A wrong key: AuthenticationError.
  const bad = new OpenAI({baseURL: process.env.BASE + '/v1', apiKey: 'wrong', maxRetries: 0});
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
  console.log('openai node client: passed (' + JSON.stringify(c.choices[0].text) + ')');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

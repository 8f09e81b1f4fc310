// The official OpenAI Node client against `hqekv serve` (BASE, key node-key).
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

#!/usr/bin/env node
// cardsig.mjs signs and verifies Agent Card signatures as A2A 1.0 §8.4
// defines them, with Node's standard library alone. It shares no code with
// listings/cardsig on purpose: the tests run each against the other (the
// meter's proxied card verified here; a card signed here verified there),
// so a mistake in either's canonical form shows as a failed signature.
//
//   node scripts/cardsig.mjs verify (--url URL | --card FILE|-) [--jwks FILE]
//       Verifies the card's signatures; the key set is FILE or, without it,
//       fetched from each signature's jku. Prints one JSON line; exits 0
//       when a signature verifies, 1 when none does, 2 on bad usage.
//   node scripts/cardsig.mjs sign --card FILE --key JWK [--jku URL]
//       Prints the card with its signatures replaced by one made with the
//       private JWK (its alg, or ES256/EdDSA/RS256 by key type).
//   node scripts/cardsig.mjs payload --card FILE|- [--form 1.0|0.3]
//       Prints the signing payload: the card without signatures, default
//       values removed (§8.4.1) when it is a 1.0 card (it has
//       supportedInterfaces, or --form 1.0 says so), in RFC 8785 form.
//   node scripts/cardsig.mjs keygen --alg ES256|EdDSA|RS256 --kid KID
//   node scripts/cardsig.mjs jwks --key JWK
//       Make a private JWK; print the JWKS of its public half.
import { readFileSync } from 'node:fs';
import crypto from 'node:crypto';

// The A2A 1.0.1 proto (specification/a2a.proto, as the spec publishes
// it): §8.4.1 decides what is a default by the proto's field presence,
// so the rule reads the proto itself.
const PROTO = readFileSync(new URL('../listings/agentcard/protoschema/a2a-v1.0.1.proto', import.meta.url), 'utf8');

// messages maps a message name to its fields, by JSON name and by proto
// name (ProtoJSON parsers accept both).
const messages = parseProto(PROTO);

function parseProto(text) {
  const out = {};
  let msg = null;
  let oneof = false;
  for (const line of text.split('\n')) {
    let m;
    if ((m = line.match(/^message (\w+) \{/))) {
      msg = out[m[1]] = {};
    } else if (line.match(/^\s*oneof \w+ \{/)) {
      oneof = true;
    } else if (line.match(/^\s+\}/)) {
      oneof = false;
    } else if ((m = line.match(/^\s*(optional |repeated )?(map<\w+, ([\w.]+)>|[\w.]+) (\w+) = \d+/))) {
      const f = {
        optional: m[1] === 'optional ',
        repeated: m[1] === 'repeated ',
        map: m[2].startsWith('map<'),
        type: m[3] || m[2],
        required: line.includes('REQUIRED'),
        oneof,
      };
      msg[m[4]] = f;
      msg[m[4].replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase())] = f;
    }
  }
  return out;
}

// A proto3 field without presence holds its type's default when it is
// the zero of its scalar, or an empty list or map. A message field, an
// optional one and a oneof member have presence: set is set.
function isDefault(f, v) {
  if (v === null) return true; // ProtoJSON's null: not set
  if (f.repeated) return Array.isArray(v) && v.length === 0;
  if (f.map) return typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0;
  if (messages[f.type] || f.type.startsWith('google.protobuf.')) return false;
  return v === '' || v === false || v === 0;
}

// stripDefaults applies §8.4.1's rule to obj, a message of type, in place;
// it returns the paths of the members it removed. Members the proto does
// not name are kept as they are.
function stripDefaults(type, obj, path, removed) {
  const fields = messages[type];
  if (!fields || obj === null || typeof obj !== 'object' || Array.isArray(obj)) return removed;
  for (const k of Object.keys(obj)) {
    const f = fields[k];
    if (!f) continue;
    const v = obj[k];
    if (v === null && !f.required) {
      delete obj[k]; // not set, optional or not
      removed.push(path + k);
      continue;
    }
    if (!f.required && !f.optional && !f.oneof && isDefault(f, v)) {
      delete obj[k];
      removed.push(path + k);
      continue;
    }
    if (!messages[f.type]) continue;
    if (f.repeated && Array.isArray(v)) {
      v.forEach((e, i) => stripDefaults(f.type, e, `${path}${k}[${i}].`, removed));
    } else if (f.map && v && typeof v === 'object') {
      for (const mk of Object.keys(v)) stripDefaults(f.type, v[mk], `${path}${k}[${JSON.stringify(mk)}].`, removed);
    } else {
      stripDefaults(f.type, v, `${path}${k}.`, removed);
    }
  }
  return removed;
}

// canonical is RFC 8785: JCS is defined by ECMAScript's JSON.stringify
// for strings and numbers, and members sorted by their names' UTF-16 code
// units, which is what Array.prototype.sort does with strings.
function canonical(v) {
  if (typeof v === 'number' && !Number.isFinite(v)) throw new Error('not a JSON number');
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
}

// payload is what a signature of cardText covers. A 1.0 card (it has
// supportedInterfaces) loses its default values (§8.4.1); a 0.3 card,
// whose schema has no proto presence, is taken as it is.
function payload(cardText, forceForm) {
  const card = JSON.parse(cardText);
  if (card === null || typeof card !== 'object' || Array.isArray(card)) throw new Error('the card is not a JSON object');
  delete card.signatures;
  const form = forceForm || ('supportedInterfaces' in card || 'supported_interfaces' in card ? '1.0' : '0.3');
  const removed = form === '1.0' ? stripDefaults('AgentCard', card, '', []) : [];
  return { bytes: Buffer.from(canonical(card), 'utf8'), form, removed };
}

const b64u = (b) => Buffer.from(b).toString('base64url');

function algOf(jwk) {
  if (jwk.alg) return jwk.alg;
  if (jwk.kty === 'EC' && jwk.crv === 'P-256') return 'ES256';
  if (jwk.kty === 'OKP' && jwk.crv === 'Ed25519') return 'EdDSA';
  if (jwk.kty === 'RSA') return 'RS256';
  throw new Error(`no algorithm for a ${jwk.kty} key`);
}

// How each JWS algorithm (RFC 7518 §3) signs with node:crypto, and the
// key it needs.
const ALGS = {
  ES256: { hash: 'sha256', kty: 'EC', crv: 'P-256', dsaEncoding: 'ieee-p1363' },
  ES384: { hash: 'sha384', kty: 'EC', crv: 'P-384', dsaEncoding: 'ieee-p1363' },
  ES512: { hash: 'sha512', kty: 'EC', crv: 'P-521', dsaEncoding: 'ieee-p1363' },
  RS256: { hash: 'sha256', kty: 'RSA' },
  RS384: { hash: 'sha384', kty: 'RSA' },
  RS512: { hash: 'sha512', kty: 'RSA' },
  PS256: { hash: 'sha256', kty: 'RSA', pss: 32 },
  PS384: { hash: 'sha384', kty: 'RSA', pss: 48 },
  PS512: { hash: 'sha512', kty: 'RSA', pss: 64 },
  EdDSA: { hash: null, kty: 'OKP', crv: 'Ed25519' },
};

function keyOptions(alg, key) {
  const a = ALGS[alg];
  const o = { key };
  if (a.dsaEncoding) o.dsaEncoding = a.dsaEncoding;
  if (a.pss) Object.assign(o, { padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: a.pss });
  return o;
}

function sign(cardText, jwk, jku) {
  const alg = algOf(jwk);
  const header = { alg, typ: 'JOSE', kid: jwk.kid };
  if (jku) header.jku = jku;
  const protectedB64 = b64u(JSON.stringify(header));
  const p = payload(cardText);
  const input = Buffer.from(protectedB64 + '.' + b64u(p.bytes), 'ascii');
  const key = crypto.createPrivateKey({ key: jwk, format: 'jwk' });
  const sig = crypto.sign(ALGS[alg].hash, input, keyOptions(alg, key));
  const card = JSON.parse(cardText);
  card.signatures = [{ protected: protectedB64, signature: b64u(sig) }];
  return JSON.stringify(card, null, 2) + '\n';
}

async function fetchText(url) {
  const res = await fetch(url, { headers: { Accept: 'application/json' } });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return res.text();
}

// verify checks each signature of cardText in turn (§8.4.3); the first
// that verifies wins.
async function verify(cardText, jwksText) {
  const p = payload(cardText);
  const sigs = JSON.parse(cardText).signatures;
  const result = { verified: false, form: p.form, removedDefaults: p.removed, payloadSHA256: crypto.createHash('sha256').update(p.bytes).digest('hex') };
  if (!Array.isArray(sigs) || sigs.length === 0) return { ...result, reason: 'the card has no signatures' };
  const reasons = [];
  for (const [i, s] of sigs.entries()) {
    const why = (r) => reasons.push(`signature ${i + 1}: ${r}`);
    let header;
    try {
      header = JSON.parse(Buffer.from(s.protected, 'base64url').toString('utf8'));
    } catch {
      why('the protected header is not base64url JSON');
      continue;
    }
    const a = ALGS[header.alg];
    if (!a) {
      why(`algorithm ${header.alg} is not a signature algorithm`);
      continue;
    }
    let set;
    try {
      set = JSON.parse(jwksText ?? (await fetchText(header.jku)));
    } catch (e) {
      why(`no key set: ${e.message}`);
      continue;
    }
    const jwk = (set.keys || []).find((k) => k.kid === header.kid);
    if (!jwk) {
      why(`no key ${header.kid} in the key set`);
      continue;
    }
    if (jwk.kty !== a.kty || (a.crv && jwk.crv !== a.crv) || (jwk.alg && jwk.alg !== header.alg)) {
      why(`key ${header.kid} (${jwk.kty} ${jwk.crv || ''}) is not for ${header.alg}`);
      continue;
    }
    const pub = { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y, n: jwk.n, e: jwk.e };
    const key = crypto.createPublicKey({ key: pub, format: 'jwk' });
    const input = Buffer.from(s.protected + '.' + b64u(p.bytes), 'ascii');
    if (crypto.verify(a.hash, input, keyOptions(header.alg, key), Buffer.from(s.signature, 'base64url'))) {
      return { ...result, verified: true, alg: header.alg, kid: header.kid, jku: header.jku ?? '', signature: i + 1 };
    }
    why('it does not verify over the canonical payload');
  }
  return { ...result, reason: reasons.join('; ') };
}

function readInput(name) {
  return name === '-' ? readFileSync(0, 'utf8') : readFileSync(name, 'utf8');
}

function flags(args) {
  const f = {};
  for (let i = 0; i < args.length; i += 2) {
    if (!args[i].startsWith('--') || i + 1 >= args.length) usage(`bad argument ${args[i]}`);
    f[args[i].slice(2)] = args[i + 1];
  }
  return f;
}

function usage(why) {
  process.stderr.write(`cardsig.mjs: ${why}\n`);
  process.exit(2);
}

async function main([cmd, ...rest]) {
  const f = flags(rest);
  switch (cmd) {
    case 'verify': {
      let card;
      if (f.url) card = await fetchText(f.url);
      else if (f.card) card = readInput(f.card);
      else usage('verify needs --url or --card');
      const r = await verify(card, f.jwks ? readFileSync(f.jwks, 'utf8') : undefined);
      process.stdout.write(JSON.stringify(r) + '\n');
      process.exit(r.verified ? 0 : 1);
      break;
    }
    case 'sign':
      if (!f.card || !f.key) usage('sign needs --card and --key');
      process.stdout.write(sign(readInput(f.card), JSON.parse(readFileSync(f.key, 'utf8')), f.jku));
      break;
    case 'payload':
      if (!f.card) usage('payload needs --card');
      if (f.form && f.form !== '1.0' && f.form !== '0.3') usage('--form is 1.0 or 0.3');
      process.stdout.write(payload(readInput(f.card), f.form).bytes);
      break;
    case 'keygen': {
      const alg = f.alg || 'ES256';
      const a = ALGS[alg] || usage(`unknown algorithm ${alg}`);
      const type = a.kty === 'EC' ? 'ec' : a.kty === 'OKP' ? 'ed25519' : 'rsa';
      const opts = a.kty === 'EC' ? { namedCurve: a.crv } : a.kty === 'RSA' ? { modulusLength: 2048 } : {};
      const { privateKey } = crypto.generateKeyPairSync(type, opts);
      process.stdout.write(JSON.stringify({ ...privateKey.export({ format: 'jwk' }), kid: f.kid || 'key-1', alg }, null, 2) + '\n');
      break;
    }
    case 'jwks': {
      if (!f.key) usage('jwks needs --key');
      const jwk = JSON.parse(readFileSync(f.key, 'utf8'));
      const pub = crypto.createPublicKey({ key: jwk, format: 'jwk' }).export({ format: 'jwk' });
      process.stdout.write(JSON.stringify({ keys: [{ ...pub, kid: jwk.kid, alg: algOf(jwk), use: 'sig' }] }, null, 2) + '\n');
      break;
    }
    default:
      usage('command: verify, sign, payload, keygen or jwks');
  }
}

main(process.argv.slice(2)).catch((e) => {
  process.stdout.write(JSON.stringify({ verified: false, reason: e.message }) + '\n');
  process.exit(1);
});

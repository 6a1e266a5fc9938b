import { createHash, hkdfSync } from 'node:crypto';
import { ml_kem768 } from '@noble/post-quantum/ml-kem.js';

/**
 * The hybrid session key: HKDF-SHA256 over the BB84 key and an ML-KEM-768 (FIPS 203) shared secret,
 * concatenated as the input keying material. HKDF's extract step is a randomness extractor over the whole
 * input, so the result stays secret while either part does: a broken QKD link (or a simulation, as here)
 * leaves the post-quantum secret, and a broken ML-KEM leaves the QKD key.
 */

export const HYBRID_SALT = 'ops-supergraph/bonding/hybrid-key/v1';

export interface KemExchange {
  sharedSecret: Uint8Array;
  publicKeyBytes: number;
  ciphertextBytes: number;
}

/**
 * One ML-KEM-768 exchange as the two ends run it: the receiver's key pair, the sender's encapsulation
 * against its public key, the receiver's decapsulation; both ends must hold the same secret. Seeds make
 * it deterministic (keygen: 64 bytes, encapsulation: 32 bytes); without them node:crypto supplies them.
 */
export function mlKemExchange(seeds?: { keygen: Uint8Array; encapsulation: Uint8Array }): KemExchange {
  const keys = seeds ? ml_kem768.keygen(seeds.keygen) : ml_kem768.keygen();
  const { cipherText, sharedSecret } = seeds ? ml_kem768.encapsulate(keys.publicKey, seeds.encapsulation) : ml_kem768.encapsulate(keys.publicKey);
  const received = ml_kem768.decapsulate(cipherText, keys.secretKey);
  if (!equalBytes(received, sharedSecret)) throw new Error('ML-KEM decapsulation disagrees with encapsulation');
  return { sharedSecret, publicKeyBytes: keys.publicKey.length, ciphertextBytes: cipherText.length };
}

/** HKDF-SHA256(ikm = qkdKey || kemSecret, salt, info = context) to `bits` bits (a last partial byte is masked). */
export function hybridKey(qkdKey: Uint8Array, kemSecret: Uint8Array, bits: number, context: string): Uint8Array {
  const ikm = new Uint8Array(qkdKey.length + kemSecret.length);
  ikm.set(qkdKey, 0);
  ikm.set(kemSecret, qkdKey.length);
  const bytes = new Uint8Array(hkdfSync('sha256', ikm, HYBRID_SALT, `${context}|${bits}`, Math.ceil(bits / 8)));
  if (bits % 8 !== 0) bytes[bytes.length - 1]! &= (0xff << (8 - (bits % 8))) & 0xff;
  return bytes;
}

/** SHA-256 of the key, first 16 bytes in hex: names a key without revealing it. */
export function fingerprint(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 32);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i]! ^ b[i]!;
  return d === 0;
}

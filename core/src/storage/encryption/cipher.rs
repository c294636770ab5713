//! The providers' value formats, byte for byte as upstream writes them (so that an etcd store stays readable by a
//! Go server with the same configuration): `k8s:enc:<provider>:v1:<key name>:` then
//!
//! - aescbc: a random 16-byte IV, then AES-CBC of the value with PKCS#7 padding (no authentication);
//! - aesgcm: a random 12-byte nonce, then AES-GCM of the value with the storage key as additional data;
//! - secretbox: a random 24-byte nonce, then NaCl secretbox (XSalsa20-Poly1305, tag first).
//!
//! The ciphers are RustCrypto's (`aes` with `cbc`, `aes-gcm`, `crypto_secretbox`); nonces and IVs come from the
//! system's random source through `ring`, which the server already uses.

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use bytes::Bytes;
use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use ring::rand::SecureRandom;

use super::config::Transformers;

/// What every encrypted value starts with; the identity provider refuses to read such a value.
const ENCRYPTED: &[u8] = b"k8s:enc:";

type Aes192Gcm = aes_gcm::AesGcm<aes::Aes192, U12>;

/// One key of one provider.
/// AES-GCM with a key of each size AES has.
pub(super) enum Gcm {
    A128(Box<aes_gcm::Aes128Gcm>),
    A192(Box<Aes192Gcm>),
    A256(Box<aes_gcm::Aes256Gcm>),
}

impl Gcm {
    fn encrypt(&self, nonce: &[u8], payload: Payload<'_, '_>) -> Result<Vec<u8>, aes_gcm::Error> {
        let n = aes_gcm::Nonce::<U12>::from_slice(nonce);
        match self {
            Gcm::A128(c) => c.encrypt(n, payload),
            Gcm::A192(c) => c.encrypt(n, payload),
            Gcm::A256(c) => c.encrypt(n, payload),
        }
    }

    fn decrypt(&self, nonce: &[u8], payload: Payload<'_, '_>) -> Result<Vec<u8>, aes_gcm::Error> {
        let n = aes_gcm::Nonce::<U12>::from_slice(nonce);
        match self {
            Gcm::A128(c) => c.decrypt(n, payload),
            Gcm::A192(c) => c.decrypt(n, payload),
            Gcm::A256(c) => c.decrypt(n, payload),
        }
    }
}

pub(super) enum Cipher {
    Identity,
    Cbc(Vec<u8>),
    Gcm(Gcm),
    Secretbox(Box<crypto_secretbox::XSalsa20Poly1305>),
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.write_str(match self {
            Cipher::Identity => "identity",
            Cipher::Cbc(_) => "aescbc",
            Cipher::Gcm(_) => "aesgcm",
            Cipher::Secretbox(_) => "secretbox",
        })
    }
}

impl Cipher {
    pub(super) fn aes_cbc(key: &[u8]) -> Option<Cipher> {
        matches!(key.len(), 16 | 24 | 32).then(|| Cipher::Cbc(key.to_vec()))
    }

    pub(super) fn aes_gcm(key: &[u8]) -> Option<Cipher> {
        Some(Cipher::Gcm(match key.len() {
            16 => Gcm::A128(Box::new(aes_gcm::Aes128Gcm::new_from_slice(key).ok()?)),
            24 => Gcm::A192(Box::new(Aes192Gcm::new_from_slice(key).ok()?)),
            32 => Gcm::A256(Box::new(aes_gcm::Aes256Gcm::new_from_slice(key).ok()?)),
            _ => return None,
        }))
    }

    pub(super) fn secretbox(key: &[u8]) -> Option<Cipher> {
        Some(Cipher::Secretbox(Box::new(
            crypto_secretbox::XSalsa20Poly1305::new_from_slice(key).ok()?,
        )))
    }

    fn seal(&self, data: &[u8], key: &str) -> Result<Vec<u8>, String> {
        match self {
            Cipher::Identity => Ok(data.to_vec()),
            Cipher::Cbc(k) => {
                let iv = random::<16>()?;
                let sealed = match k.len() {
                    16 => cbc::Encryptor::<aes::Aes128>::new_from_slices(k, &iv)
                        .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(data)),
                    24 => cbc::Encryptor::<aes::Aes192>::new_from_slices(k, &iv)
                        .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(data)),
                    _ => cbc::Encryptor::<aes::Aes256>::new_from_slices(k, &iv)
                        .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(data)),
                }
                .map_err(|e| e.to_string())?;
                Ok([&iv[..], &sealed].concat())
            }
            Cipher::Gcm(c) => {
                let nonce = random::<12>()?;
                let payload = Payload {
                    msg: data,
                    aad: key.as_bytes(),
                };
                let sealed = c.encrypt(&nonce, payload).map_err(|e| e.to_string())?;
                Ok([&nonce[..], &sealed].concat())
            }
            Cipher::Secretbox(c) => {
                let nonce = random::<24>()?;
                let sealed = c
                    .encrypt(crypto_secretbox::Nonce::from_slice(&nonce), data)
                    .map_err(|e| e.to_string())?;
                Ok([&nonce[..], &sealed].concat())
            }
        }
    }

    fn open(&self, data: &[u8], key: &str) -> Result<Vec<u8>, String> {
        match self {
            Cipher::Identity => {
                if data.starts_with(ENCRYPTED) {
                    return Err("identity transformer tried to read encrypted data".into());
                }
                Ok(data.to_vec())
            }
            Cipher::Cbc(k) => {
                if data.len() < 16 {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (iv, sealed) = data.split_at(16);
                if sealed.len() % 16 != 0 {
                    return Err("the stored data is not a multiple of the block size".into());
                }
                let opened = match k.len() {
                    16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(k, iv)
                        .map(|c| c.decrypt_padded_vec_mut::<Pkcs7>(sealed)),
                    24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(k, iv)
                        .map(|c| c.decrypt_padded_vec_mut::<Pkcs7>(sealed)),
                    _ => cbc::Decryptor::<aes::Aes256>::new_from_slices(k, iv)
                        .map(|c| c.decrypt_padded_vec_mut::<Pkcs7>(sealed)),
                }
                .map_err(|e| e.to_string())?;
                opened.map_err(|_| "invalid padding on input".to_string())
            }
            Cipher::Gcm(c) => {
                if data.len() < 12 {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (nonce, sealed) = data.split_at(12);
                let payload = Payload {
                    msg: sealed,
                    aad: key.as_bytes(),
                };
                c.decrypt(nonce, payload)
                    .map_err(|_| "cipher: message authentication failed".to_string())
            }
            Cipher::Secretbox(c) => {
                if data.len() < 24 {
                    return Err("the stored data was shorter than the required size".into());
                }
                let (nonce, sealed) = data.split_at(24);
                c.decrypt(crypto_secretbox::Nonce::from_slice(nonce), sealed)
                    .map_err(|_| "output array was not large enough for encryption".to_string())
            }
        }
    }
}

fn random<const N: usize>() -> Result<[u8; N], String> {
    let mut out = [0; N];
    ring::rand::SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| "no random bytes from the system".to_string())?;
    Ok(out)
}

/// One key of one provider with the prefix it writes.
#[derive(Debug)]
pub(super) struct PrefixedCipher {
    prefix: Vec<u8>,
    cipher: Cipher,
}

impl PrefixedCipher {
    pub(super) fn new(prefix: String, cipher: Cipher) -> Self {
        PrefixedCipher {
            prefix: prefix.into_bytes(),
            cipher,
        }
    }

    pub(super) fn identity() -> Self {
        PrefixedCipher {
            prefix: Vec::new(),
            cipher: Cipher::Identity,
        }
    }
}

impl Transformers {
    /// The value to store for `data` at `key`: sealed with the first provider's first key.
    pub fn seal(&self, data: &[u8], key: &str) -> Result<Bytes, String> {
        let first = self
            .ciphers
            .first()
            .ok_or_else(|| "no provider".to_string())?;
        let sealed = first.cipher.seal(data, key)?;
        Ok(Bytes::from([&first.prefix[..], &sealed].concat()))
    }

    /// The value stored at `key` in the clear, and whether it was written with another key than the first (it is
    /// then rewritten by the next update, even one that changes nothing: upstream's "stale").
    pub fn open(&self, stored: &[u8], key: &str) -> Result<(Bytes, bool), String> {
        let mut last_error = None;
        for (i, c) in self.ciphers.iter().enumerate() {
            let Some(rest) = stored.strip_prefix(&c.prefix[..]) else {
                continue;
            };
            match c.cipher.open(rest, key) {
                Ok(data) => return Ok((Bytes::from(data), i != 0)),
                // Identity has no prefix: an encrypted value goes on to the provider that has its prefix.
                Err(e) if c.prefix.is_empty() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| "no matching prefix found".to_string()))
    }
}

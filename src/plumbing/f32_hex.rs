//! `Option<Vec<f32>>` as a hex string, 8 digits per value (its little-endian bytes).

use serde::{Deserialize, Deserializer, Serializer};

pub fn serialize<S: Serializer>(v: &Option<Vec<f32>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        None => s.serialize_none(),
        Some(values) => {
            let mut text = String::with_capacity(values.len() * 8);
            for x in values {
                for b in x.to_le_bytes() {
                    text.push_str(&format!("{b:02x}"));
                }
            }
            s.serialize_str(&text)
        }
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<f32>>, D::Error> {
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    let bytes = text.as_bytes();
    if bytes.len() % 8 != 0 {
        return Err(serde::de::Error::custom(
            "a hex list of f32 values needs 8 digits per value",
        ));
    }
    let digit = |c: u8| -> Result<u8, D::Error> {
        (c as char)
            .to_digit(16)
            .map(|v| v as u8)
            .ok_or_else(|| serde::de::Error::custom(format!("`{}` is not a hex digit", c as char)))
    };
    bytes
        .chunks(8)
        .map(|chunk| {
            let mut b = [0u8; 4];
            for (k, pair) in chunk.chunks(2).enumerate() {
                b[k] = digit(pair[0])? << 4 | digit(pair[1])?;
            }
            Ok(f32::from_le_bytes(b))
        })
        .collect::<Result<Vec<f32>, D::Error>>()
        .map(Some)
}

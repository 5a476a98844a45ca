//! [`Value`]s to and from PostgreSQL's typed wire format: a parameter takes the type the
//! server inferred for it (an integer into `bigint`, `integer` or `double precision`), and a
//! column is read by its type, booleans as 0/1, as SQLite gives them.

use super::db::{Row, Value};
use super::{Result, StoreError};
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// A [`Value`] as a PostgreSQL parameter.
#[derive(Debug)]
pub struct PgValue<'a>(pub &'a Value);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl ToSql for PgValue<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, BoxError> {
        let wrong = || -> BoxError { format!("cannot send {:?} as {ty}", self.0).into() };
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().to_sql(ty, out),
                _ => Err(wrong()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => f.to_string().to_sql(ty, out),
                _ => Err(wrong()),
            },
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    s.as_str().to_sql(ty, out)
                }
                Type::BYTEA => s.as_bytes().to_sql(ty, out),
                _ => Err(wrong()),
            },
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.as_slice().to_sql(ty, out),
                _ => Err(wrong()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A PostgreSQL result row as a [`Row`].
pub fn row_from_pg(row: &postgres::Row) -> Result<Row> {
    let mut cells = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let value = match *ty {
            Type::BOOL => row
                .try_get::<_, Option<bool>>(i)?
                .map(|b| Value::Int(b as i64)),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)?
                .map(|v| Value::Int(v as i64)),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)?
                .map(|v| Value::Int(v as i64)),
            Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Int),
            Type::FLOAT4 => row
                .try_get::<_, Option<f32>>(i)?
                .map(|v| Value::Real(v as f64)),
            Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                row.try_get::<_, Option<String>>(i)?.map(Value::Text)
            }
            Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
            _ => {
                return Err(StoreError::Database(format!(
                    "column {} has type {ty}, which the library does not use (cast it)",
                    column.name()
                )));
            }
        };
        cells.push(value.unwrap_or(Value::Null));
    }
    Ok(Row(cells))
}

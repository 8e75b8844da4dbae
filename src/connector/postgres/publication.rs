//! The publication a Postgres source reads: the CDC tables added to it at `CREATE TABLE .. FROM`
//! (checking that it publishes every kind of change, and partitioned tables as themselves) and
//! removed at `DROP TABLE`.

use tokio_postgres::Client;

use crate::connector::common::UpstreamTable;
use crate::connector::postgres::{quote_ident, upstream_error};
use crate::error::{Error, Result};

/// Adds a table to the publication unless it is there already.
///
/// The changes of a partitioned table are written by its partitions; only a publication with
/// `publish_via_partition_root` sends them as changes of the table itself. Sluice creates its
/// publications so (and sets it on one it `owns` from before); one it did not create must
/// already be so for a partitioned table. Likewise the publication must publish every kind of
/// change (`publish` holds insert, update, delete and truncate), or the table would silently
/// miss some.
pub async fn publish_table(
    client: &Client,
    publication: &str,
    owns: bool,
    table: &UpstreamTable,
) -> Result<()> {
    let flags = client
        .query_one(
            "SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication \
             WHERE pubname = $1",
            &[&publication],
        )
        .await
        .map_err(upstream_error)?;
    let kinds = ["insert", "update", "delete", "truncate"];
    let missing: Vec<&str> = kinds
        .iter()
        .enumerate()
        .filter(|&(i, _)| !flags.get::<_, bool>(i))
        .map(|(_, k)| *k)
        .collect();
    if !missing.is_empty() {
        let alter = format!(
            "ALTER PUBLICATION {} SET (publish = 'insert, update, delete, truncate')",
            quote_ident(publication)
        );
        if owns {
            client.batch_execute(&alter).await.map_err(upstream_error)?;
        } else {
            return Err(Error::Upstream {
                code: "55000",
                message: format!(
                    "publication {} does not publish {}, so {} would miss those changes: run \
                     {alter}; upstream",
                    quote_ident(publication),
                    missing.join(", "),
                    table.qualified()
                ),
            });
        }
    }
    let partitioned: bool = client
        .query_one(
            "SELECT c.relkind = 'p' FROM pg_class c JOIN pg_namespace n ON c.relnamespace = n.oid \
             WHERE n.nspname = $1 AND c.relname = $2",
            &[&table.schema, &table.name],
        )
        .await
        .map_err(upstream_error)?
        .get(0);
    if partitioned {
        let via_root: bool = client
            .query_one("SELECT pubviaroot FROM pg_publication WHERE pubname = $1", &[&publication])
            .await
            .map_err(upstream_error)?
            .get(0);
        if !via_root && owns {
            client
                .batch_execute(&format!(
                    "ALTER PUBLICATION {} SET (publish_via_partition_root = true)",
                    quote_ident(publication)
                ))
                .await
                .map_err(upstream_error)?;
        } else if !via_root {
            return Err(Error::Upstream {
                code: "55000",
                message: format!(
                    "{} is partitioned, and the changes of its partitions reach Sluice only \
                     through a publication that publishes via the partition root: run ALTER \
                     PUBLICATION {} SET (publish_via_partition_root = true); upstream",
                    table.qualified(),
                    quote_ident(publication)
                ),
            });
        }
    }
    let present = !client
        .query(
            "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&publication, &table.schema, &table.name],
        )
        .await
        .map_err(upstream_error)?
        .is_empty();
    if !present {
        client
            .batch_execute(&format!(
                "ALTER PUBLICATION {} ADD TABLE {}",
                quote_ident(publication),
                table.qualified()
            ))
            .await
            .map_err(upstream_error)?;
    }
    Ok(())
}

/// Removes `schema.table` from `publication` if it is published there.
pub async fn unpublish_table(
    client: &Client,
    publication: &str,
    schema: &str,
    table: &str,
) -> Result<()> {
    let present = !client
        .query(
            "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
            &[&publication, &schema, &table],
        )
        .await
        .map_err(upstream_error)?
        .is_empty();
    if present {
        client
            .batch_execute(&format!(
                "ALTER PUBLICATION {} DROP TABLE {}.{}",
                quote_ident(publication),
                quote_ident(schema),
                quote_ident(table)
            ))
            .await
            .map_err(upstream_error)?;
    }
    Ok(())
}

//! Yanking and unyanking versions, and a plugin's owners: invited by an
//! owner, they become owners when they accept, and can be removed, never the
//! last.

use rusqlite::{OptionalExtension, params};

use crate::error::{Error, Result};
use crate::{Account, OwnerList, Registry, Role, db, names};

/// The most accounts one owners request may name.
const MAX_OWNERS_PER_REQUEST: usize = 100;

impl Registry {
    /// Marks `id` `version` yanked (`true`) or not: it stays downloadable,
    /// but search and default installs skip it. Owners and admins only.
    pub async fn set_yanked(
        &self,
        account: &Account,
        id: &str,
        version: &str,
        yanked: bool,
    ) -> Result<()> {
        names::plugin_id(id)?;
        names::version(version)?;
        let (id, version, account) = (id.to_string(), version.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            may_manage(&tx, &account, &id)?;
            let changed = tx.execute(
                "UPDATE versions SET yanked = ?3 WHERE plugin = ?1 AND version = ?2",
                params![id, version, yanked],
            )?;
            if changed == 0 {
                return Err(Error::NotFound(format!("{id} has no version {version}")));
            }
            update_latest(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, %version, yanked, account = %account.name, "yank changed");
            Ok(())
        })
        .await
    }

    /// The accounts that own `id`, and those invited to.
    pub async fn owners(&self, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let id = id.to_string();
        self.db(move |conn| {
            plugin_exists(conn, &id)?;
            owner_list(conn, &id)
        })
        .await
    }

    /// Invites `users` (account names) to own `id`: its owners and admins
    /// may. An invited account owns nothing until it accepts
    /// ([`Registry::accept_ownership`]), so nobody is made to answer for a
    /// plugin without agreeing to. Accounts that already own it are left
    /// as they are. Returns the owners and invitations after.
    pub async fn invite_owners(
        &self,
        account: &Account,
        id: &str,
        users: Vec<String>,
    ) -> Result<OwnerList> {
        names::plugin_id(id)?;
        if users.len() > MAX_OWNERS_PER_REQUEST {
            return Err(Error::bad_request(
                "too-many-users",
                format!("at most {MAX_OWNERS_PER_REQUEST} users per request"),
            ));
        }
        for user in &users {
            names::account(user)?;
        }
        let (id, account) = (id.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            may_manage(&tx, &account, &id)?;
            for user in &users {
                let invited = account_id(&tx, user)?;
                tx.execute(
                    "INSERT OR IGNORE INTO owner_invitations (plugin, account, invited_by, created_at)
                     SELECT ?1, ?2, ?3, ?4
                     WHERE NOT EXISTS (SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2)",
                    params![id, invited, account.id, db::now()],
                )?;
            }
            let owners = owner_list(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, ?users, account = %account.name, "owners invited");
            Ok(owners)
        })
        .await
    }

    /// `account` accepts its invitation to own `id` and becomes an owner;
    /// 404 if it has none, or if the account that sent it is no longer an
    /// owner of `id` (nor an admin): a removed owner's invitations are void
    /// (the invitation is then dropped). Returns the owners and invitations
    /// after.
    pub async fn accept_ownership(&self, account: &Account, id: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        let (id, account) = (id.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            plugin_exists(&tx, &id)?;
            // The invitation, and whether whoever sent it may still manage
            // the plugin: one sent by an owner since removed is void.
            let invitation: Option<(String, bool)> = tx
                .query_row(
                    "SELECT a.name, a.role = 'admin' OR EXISTS (
                         SELECT 1 FROM owners o WHERE o.plugin = i.plugin AND o.account = i.invited_by)
                     FROM owner_invitations i JOIN accounts a ON a.id = i.invited_by
                     WHERE i.plugin = ?1 AND i.account = ?2",
                    params![id, account.id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            let Some((inviter, valid)) = invitation else {
                return Err(Error::NotFound(format!(
                    "account {} has no invitation to own plugin {id}",
                    account.name
                )));
            };
            tx.execute(
                "DELETE FROM owner_invitations WHERE plugin = ?1 AND account = ?2",
                params![id, account.id],
            )?;
            if !valid {
                // Dropped for good: it can never become valid again.
                tx.commit()?;
                return Err(Error::NotFound(format!(
                    "account {}'s invitation to own plugin {id} was sent by {inviter}, who no \
                     longer owns it: ask a current owner to invite you again",
                    account.name
                )));
            }
            tx.execute(
                "INSERT OR IGNORE INTO owners (plugin, account) VALUES (?1, ?2)",
                params![id, account.id],
            )?;
            let owners = owner_list(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, account = %account.name, "ownership accepted");
            Ok(owners)
        })
        .await
    }

    /// Removes `user` from the owners of `id`, or withdraws its invitation:
    /// its owners and admins may (an owner may remove itself). A removed
    /// owner's invitations to `id` are withdrawn with it. The last
    /// owner cannot be removed ([`Error::LastOwner`]): a plugin always has
    /// someone to answer for it. Returns the owners and invitations after.
    pub async fn remove_owner(&self, account: &Account, id: &str, user: &str) -> Result<OwnerList> {
        names::plugin_id(id)?;
        names::account(user)?;
        let (id, user, account) = (id.to_string(), user.to_string(), account.clone());
        self.db(move |conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            may_manage(&tx, &account, &id)?;
            let removed = account_id(&tx, &user)?;
            let withdrawn = tx.execute(
                "DELETE FROM owner_invitations WHERE plugin = ?1 AND account = ?2",
                params![id, removed],
            )?;
            let is_owner = tx
                .query_row(
                    "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
                    params![id, removed],
                    |r| r.get::<_, i64>(0),
                )
                .optional()?
                .is_some();
            if is_owner {
                let owners: i64 = tx.query_row(
                    "SELECT count(*) FROM owners WHERE plugin = ?1",
                    [&id],
                    |r| r.get(0),
                )?;
                if owners <= 1 {
                    return Err(Error::LastOwner(format!(
                        "{user} is the last owner of plugin {id}: invite another owner, and \
                         let them accept, before removing it"
                    )));
                }
                tx.execute(
                    "DELETE FROM owners WHERE plugin = ?1 AND account = ?2",
                    params![id, removed],
                )?;
                // Its invitations go with it: a removed owner can no longer
                // bring in owners, through invitations sent before.
                tx.execute(
                    "DELETE FROM owner_invitations WHERE plugin = ?1 AND invited_by = ?2",
                    params![id, removed],
                )?;
            } else if withdrawn == 0 {
                return Err(Error::NotFound(format!(
                    "account {user} neither owns plugin {id} nor is invited to"
                )));
            }
            let owners = owner_list(&tx, &id)?;
            tx.commit()?;
            tracing::info!(%id, %user, account = %account.name, "owner removed");
            Ok(owners)
        })
        .await
    }
}

/// The id of the account `name`; 404 if there is none.
fn account_id(conn: &rusqlite::Connection, name: &str) -> Result<i64> {
    conn.query_row("SELECT id FROM accounts WHERE name = ?1", [name], |r| {
        r.get(0)
    })
    .optional()?
    .ok_or_else(|| Error::NotFound(format!("there is no account {name}")))
}

/// The owners and invitations of `id`.
fn owner_list(conn: &rusqlite::Connection, id: &str) -> Result<OwnerList> {
    let mut stmt = conn.prepare(
        "SELECT a.name FROM owner_invitations i JOIN accounts a ON a.id = i.account
         WHERE i.plugin = ?1 ORDER BY a.name",
    )?;
    let invited = stmt
        .query_map([id], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(OwnerList {
        users: owners_of(conn, id)?,
        invited,
    })
}

/// 404 unless the plugin `id` exists.
pub(crate) fn plugin_exists(conn: &rusqlite::Connection, id: &str) -> Result<()> {
    let found: Option<i64> = conn
        .query_row("SELECT 1 FROM plugins WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    found
        .map(|_| ())
        .ok_or_else(|| Error::NotFound(format!("there is no plugin {id}")))
}

/// The owners' account names, sorted.
pub(crate) fn owners_of(conn: &rusqlite::Connection, id: &str) -> Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT a.name FROM owners o JOIN accounts a ON a.id = o.account
         WHERE o.plugin = ?1 ORDER BY a.name",
    )?;
    let owners = stmt
        .query_map([id], |r| r.get(0))?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    Ok(owners)
}

/// 404 unless `id` exists, 403 unless `account` owns it or is an admin.
fn may_manage(conn: &rusqlite::Connection, account: &Account, id: &str) -> Result<()> {
    plugin_exists(conn, id)?;
    if account.role == Role::Admin {
        return Ok(());
    }
    let owner: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM owners WHERE plugin = ?1 AND account = ?2",
            params![id, account.id],
            |r| r.get(0),
        )
        .optional()?;
    owner.map(|_| ()).ok_or_else(|| {
        Error::NotAnOwner(format!(
            "account {} is not an owner of plugin {id}",
            account.name
        ))
    })
}

/// Sets `plugins.latest` of `id` to its highest version not yanked.
pub(crate) fn update_latest(conn: &rusqlite::Connection, id: &str) -> Result<()> {
    let mut stmt = conn.prepare("SELECT version FROM versions WHERE plugin = ?1 AND yanked = 0")?;
    let latest = stmt
        .query_map([id], |r| r.get::<_, String>(0))?
        .filter_map(|v| v.ok())
        .filter_map(|v| semver::Version::parse(&v).ok())
        .max();
    conn.execute(
        "UPDATE plugins SET latest = ?2 WHERE id = ?1",
        params![id, latest.map(|v| v.to_string())],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An invitation whose sender no longer owns the plugin (left over from
    /// before removals withdrew them) is refused and dropped; one from an
    /// admin, who owns nothing, holds.
    #[tokio::test]
    async fn an_invitation_from_a_former_owner_is_void() {
        let dir = crate::scratch::ScratchDir::new("invitations");
        let registry = Registry::open(&dir).unwrap();
        let mut accounts = Vec::new();
        for (name, role) in [
            ("alice", Role::Publisher),
            ("bob", Role::Publisher),
            ("carol", Role::Publisher),
            ("root", Role::Admin),
        ] {
            let token = registry.create_token(name, role).unwrap();
            accounts.push(registry.authenticate(&token).await.unwrap());
        }
        let [alice, bob, carol, root] = <[Account; 4]>::try_from(accounts).unwrap();
        let ids = (alice.id, bob.id, carol.id, root.id);
        registry
            .db(move |conn| {
                conn.execute_batch(&format!(
                    "INSERT INTO plugins (id, latest, created_at) VALUES ('calc', NULL, 0);
                     INSERT INTO owners (plugin, account) VALUES ('calc', {alice});
                     INSERT INTO owner_invitations (plugin, account, invited_by, created_at)
                         VALUES ('calc', {carol}, {bob}, 0), ('calc', {root}, {root}, 0);",
                    alice = ids.0,
                    bob = ids.1,
                    carol = ids.2,
                    root = ids.3,
                ))?;
                Ok(())
            })
            .await
            .unwrap();
        let refused = registry.accept_ownership(&carol, "calc").await.unwrap_err();
        assert!(
            matches!(&refused, Error::NotFound(m) if m.contains("sent by bob")),
            "{refused:?}"
        );
        let owners = registry.owners("calc").await.unwrap();
        assert_eq!(owners.users, ["alice"]);
        assert_eq!(owners.invited, ["root"]);
        let owners = registry.accept_ownership(&root, "calc").await.unwrap();
        assert_eq!(owners.users, ["alice", "root"]);
    }
}
